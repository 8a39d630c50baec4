package keptlogs

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Suffix ends the name of every kept log: <container>.log.
const Suffix = ".log"

// uidName is what a pod's UID may be in a directory name: a UUID, or any
// word of letters, digits and dashes (tests name their pods' UIDs).
var uidName = regexp.MustCompile(`^[0-9A-Za-z][-0-9A-Za-z]{0,63}$`)

// PodDir is the name of a pod's directory of kept logs, as host/cells
// writes it: <namespace>_<name>_<uid>.
func PodDir(namespace, name, uid string) string { return namespace + "_" + name + "_" + uid }

// ParsePodDir splits a pod's directory name of the layout (PodDir); ok is
// false for any other name.
func ParsePodDir(dir string) (namespace, name, uid string, ok bool) {
	namespace, rest, ok := strings.Cut(dir, "_")
	if !ok {
		return "", "", "", false
	}
	name, uid, ok = strings.Cut(rest, "_")
	if !ok || len(validation.IsDNS1123Label(namespace)) != 0 || len(validation.IsDNS1123Subdomain(name)) != 0 || !uidName.MatchString(uid) {
		return "", "", "", false
	}
	return namespace, name, uid, true
}

// ValidPodDir reports whether name is a pod's directory of kept logs as
// host/cells writes it, <namespace>_<name>_<uid>: a namespace (a DNS
// label), a pod name (a DNS subdomain) and a UID, none holding an
// underscore, a slash or "..". The mirror takes no other name from a
// listing, so no listing reaches outside the directory.
func ValidPodDir(name string) bool {
	_, _, _, ok := ParsePodDir(name)
	return ok
}

// FileName is the name of a container's kept log: <container>.log.
func FileName(container string) string { return container + Suffix }

// ValidFile reports whether name is a kept container log, <container>.log
// with a container name (a DNS label). The temporary files host/cells and
// the mirror write beside them have other names.
func ValidFile(name string) bool {
	c, ok := strings.CutSuffix(name, Suffix)
	return ok && len(validation.IsDNS1123Label(c)) == 0
}
