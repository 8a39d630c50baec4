package apitest

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api/internal/cellv1"
)

// CheckApplyPod dials the agent at addr with clientTLS and calls ApplyPod
// (generation 7). With wantErr empty the call must succeed; otherwise the
// TLS handshake must refuse the connection (the call fails Unavailable)
// and, unless wantErr is "*", the error must mention wantErr.
func CheckApplyPod(t *testing.T, addr string, clientTLS *tls.Config, wantErr string) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := cellv1.NewCellClient(cc).ApplyPod(ctx, &cellv1.ApplyPodRequest{Generation: 7})
	if wantErr == "" {
		if err != nil || resp.GetGeneration() != 7 {
			t.Fatalf("ApplyPod = %v, %v; want generation 7", resp, err)
		}
		return
	}
	// The server's refusal reaches the client as a broken connection; the
	// client's own refusal names the cell.
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("ApplyPod error = %v, want the connection refused (Unavailable)", err)
	}
	if wantErr != "*" && !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("ApplyPod error = %v, want one mentioning %q", err, wantErr)
	}
}
