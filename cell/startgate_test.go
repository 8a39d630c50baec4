package cell

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

func TestAwaitStartGate(t *testing.T) {
	tests := []struct {
		name       string
		supervisor func(w *os.File) // what the supervisor does with its end
		want       bool
	}{
		{"opened", func(w *os.File) { _, _ = w.Write([]byte{1}); _ = w.Close() }, true},
		{"supervisor died first", func(w *os.File) { _ = w.Close() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			go tt.supervisor(w)
			// The agent's gate is a descriptor number it inherited: a
			// duplicate stands for it (AwaitStartGate closes it).
			fd, err := dupFD(r)
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{EnvStartGate: strconv.Itoa(fd)}
			got, err := AwaitStartGate(func(k string) string { return env[k] })
			if err != nil || got != tt.want {
				t.Fatalf("AwaitStartGate = %v, %v; want %v, nil", got, err, tt.want)
			}
		})
	}
}

func TestAwaitStartGateWithout(t *testing.T) {
	for _, v := range []string{"", "x", "1"} {
		got, err := AwaitStartGate(func(string) string { return v })
		if v == "" {
			if !got || err != nil {
				t.Errorf("no gate: AwaitStartGate = %v, %v; want true, nil", got, err)
			}
			continue
		}
		if got || err == nil {
			t.Errorf("gate %q: AwaitStartGate = %v, %v; want false and an error", v, got, err)
		}
	}
}

func dupFD(f *os.File) (int, error) { return syscall.Dup(int(f.Fd())) }
