package cell_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/api"
)

const testBootstrap = `{"version":2,"cellID":"cell-1","podUID":"uid-1","caCert":"ca","joinToken":"token"}`

// userData is what a cloud plugin sends (pluginapi/userdata.Build, whose
// golden file is pluginapi/userdata/testdata/user-data.golden): CRLF line
// ends, a cloud-config part, then the bootstrap part.
const userData = "Content-Type: multipart/mixed; boundary=\"kipcell-0123\"\r\nMIME-Version: 1.0\r\n\r\n" +
	"--kipcell-0123\r\nContent-Type: text/cloud-config; charset=\"utf-8\"\r\nContent-Disposition: attachment; filename=\"cloud-config.yaml\"\r\n\r\n" +
	"#cloud-config\npackages: [containerd, runc]\n\r\n" +
	"--kipcell-0123\r\nContent-Type: application/vnd.kipcell.bootstrap+json\r\nContent-Disposition: attachment; filename=\"kip-bootstrap.json\"\r\n\r\n" +
	testBootstrap + "\r\n--kipcell-0123--\r\n"

func TestReadBootstrap(t *testing.T) {
	tests := map[string]struct {
		file    string
		wantErr string
	}{
		"bootstrap JSON":         {file: testBootstrap},
		"JSON with a newline":    {file: "\n" + testBootstrap + "\n"},
		"MIME user data":         {file: userData},
		"MIME with LF line ends": {file: strings.ReplaceAll(userData, "\r\n", "\n")},
		"no bootstrap part": {
			file:    "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/cloud-config\n\n#cloud-config\n--B--\n",
			wantErr: "no application/vnd.kipcell.bootstrap+json part",
		},
		"shell script":  {file: "#!/bin/sh\necho hi\n", wantErr: "neither a bootstrap (JSON) nor MIME"},
		"not multipart": {file: "Content-Type: text/plain\n\nhello\n", wantErr: "not multipart"},
		"invalid bootstrap in the part": {
			file:    strings.Replace(userData, `"cellID":"cell-1"`, `"cellID":"Cell_1"`, 1),
			wantErr: "invalid bootstrap",
		},
		"a version 1 bootstrap, with the cell's key": {
			file:    `{"version":1,"cellID":"cell-1","podUID":"uid-1","caCert":"ca","cert":"cert","key":"key"}`,
			wantErr: "version 1 carries the cell's private key",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bootstrap")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := cell.ReadBootstrap(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadBootstrap = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := &api.Bootstrap{Version: 2, CellID: "cell-1", PodUID: "uid-1", CACert: "ca", JoinToken: "token"}
			if diff := cmp.Diff(want, b); diff != "" {
				t.Errorf("bootstrap (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := cell.ReadBootstrap(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "reading bootstrap") {
		t.Errorf("ReadBootstrap of a missing file = %v", err)
	}
}
