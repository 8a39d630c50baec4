package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name          string
		args          []string
		wantCommand   string
		wantState     string
		wantAPIServer []string
		wantLog       string
		wantErr       bool
	}{
		{name: "no command", args: []string{"--state", "/s"}, wantErr: true},
		{name: "flags before the command", args: []string{"--state", "/s", "up"}, wantCommand: "up", wantState: "/s"},
		{
			name:          "apiserver flags after the command, repeated",
			args:          []string{"--state", "/s", "up", "--apiserver-arg=--enable-aggregator-routing=true", "--apiserver-arg", "--v=2"},
			wantCommand:   "up",
			wantState:     "/s",
			wantAPIServer: []string{"--enable-aggregator-routing=true", "--v=2"},
		},
		{name: "a log file", args: []string{"--state", "/s", "up", "--log", "/s/build.log"}, wantCommand: "up", wantState: "/s", wantLog: "/s/build.log"},
		{name: "a stray argument", args: []string{"--state", "/s", "up", "extra"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			command, o, err := parse(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parse(%q): err = %v, want error %v", tt.args, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if command != tt.wantCommand || o.state != tt.wantState {
				t.Errorf("parse(%q) = command %q, state %q; want %q, %q", tt.args, command, o.state, tt.wantCommand, tt.wantState)
			}
			if o.log != tt.wantLog {
				t.Errorf("parse(%q): log %q, want %q", tt.args, o.log, tt.wantLog)
			}
			if diff := cmp.Diff(tt.wantAPIServer, o.apiserverArgs); diff != "" {
				t.Errorf("apiserver flags (-want +got):\n%s", diff)
			}
		})
	}
}
