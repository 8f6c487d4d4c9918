package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/signature"
)

// TestSendReachesAPrivateReceiver: send tries a receiver the way a worker
// whose Guard has a TLSClientConfig reaches it: a receiver whose
// certificate a private CA signed is trusted with -cacert, and one that
// asks for a client certificate (mutual TLS) gets -cert and -key. Without
// them the send fails, naming the cause and nothing of the files.
func TestSendReachesAPrivateReceiver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(signature.NewStandardWebhooksSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey := writeClientCertificate(t, dir)
	leaf, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(leaf.Leaf)

	start := func(mutual bool) (*httptest.Server, string) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused below
		if mutual {
			srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}
		}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		return srv, ca
	}
	private, privateCA := start(false)
	mutual, mutualCA := start(true)

	for _, tc := range []struct {
		name string
		srv  *httptest.Server
		args []string
		code int
		err  string // what stderr says
	}{
		{"a private CA not trusted", private, nil, exitFailed, "certificate signed by unknown authority"},
		{"a private CA trusted", private, []string{"-cacert", privateCA}, exitOK, ""},
		{"mutual TLS without a client certificate", mutual, []string{"-cacert", mutualCA}, exitFailed, "certificate required"},
		{"mutual TLS with a client certificate", mutual, []string{"-cacert", mutualCA, "-cert", clientCert, "-key", clientKey}, exitOK, ""},
		{"a -cert without its -key", mutual, []string{"-cacert", mutualCA, "-cert", clientCert}, exitUsage, "-cert and -key go together"},
		{"a -cacert that holds no certificate", private, []string{"-cacert", secretFile}, exitUsage, "-cacert holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"send", "-url", tc.srv.URL + "/notes", "-secret-file", secretFile, "-allow-private", "-profile", "none"}, tc.args...)
			code, out, errOut := courierRun(t, args...)
			if code != tc.code || !strings.Contains(errOut, tc.err) {
				t.Fatalf("send %v: exit %d, stderr %q; want %d saying %q\nstdout: %s", tc.args, code, errOut, tc.code, tc.err, out)
			}
			if secret, _ := os.ReadFile(secretFile); strings.Contains(out+errOut, strings.TrimSpace(string(secret))) {
				t.Fatalf("send %v printed the secret", tc.args)
			}
		})
	}
}

// writeClientCertificate writes a self-signed client certificate and its
// key, PEM, into dir, and returns their files.
func writeClientCertificate(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"sender.internal"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "sender.crt"), filepath.Join(dir, "sender.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestSendShowsAHostileCertificateInert: a refused certificate's error
// quotes the names the receiver's certificate holds, any ASCII the
// receiver chose, control characters included: send shows them escaped,
// as it shows a refusal's answer, so that no certificate drives the
// operator's terminal.
func TestSendShowsAHostileCertificateInert(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(signature.NewStandardWebhooksSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostile := "receiver\r\x1b[2J\x1b]52;c;cHduZWQ=\x07.example"
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{hostile}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()
	target := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) // a name, which the certificate's do not match
	code, out, errOut := courierRun(t, "send", "-url", target+"/notes", "-secret-file", secretFile, "-allow-private", "-profile", "none")
	if code != exitFailed || strings.ContainsAny(out+errOut, "\r\x1b\x07") || !strings.Contains(errOut, `\r\x1b[2J\x1b]52;c;cHduZWQ=\a`) {
		t.Fatalf("send to a receiver whose certificate names terminal controls: exit %d, stderr %q; want them escaped", code, errOut)
	}
}
