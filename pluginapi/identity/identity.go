package identity

import "net/url"

// Audience is the audience of a cell's identity token:
// kipcell.io/join/<cluster ID>/<cell ID>, the cluster ID path-escaped. The
// agent derives it from its bootstrap (clusterID, cellID), the plugin from
// its configuration's cluster ID and the instance it asks about, whose
// name is the cell ID. A token minted for this audience is good for the
// join of this cell in this cluster only: not for another Kip cluster in
// the project, nor for any other service that accepts the instance's
// tokens (each asks for its own audience), and no token minted for one of
// those is good here.
func Audience(clusterID, cellID string) string {
	return "kipcell.io/join/" + url.PathEscape(clusterID) + "/" + cellID
}
