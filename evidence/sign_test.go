package evidence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/refusal"
)

// TestSignerFromSeed: the same seed is the same key; another seed is
// another key; a seed of the wrong size is refused.
func TestSignerFromSeed(t *testing.T) {
	a, b, c := mustSigner(t, 1), mustSigner(t, 1), mustSigner(t, 2)
	if !a.Public().Equal(b.Public()) || a.Public().Equal(c.Public()) {
		t.Error("the key does not follow the seed")
	}
	for _, n := range []int{0, 31, 33, 64} {
		if _, err := NewSigner(make([]byte, n)); !errors.Is(err, refusal.Invalid) {
			t.Errorf("NewSigner of a %d-byte seed = %v, want Invalid", n, err)
		}
	}
}

// TestKeyID: the hex SHA-256 of the raw public key.
func TestKeyID(t *testing.T) {
	s := mustSigner(t, 1)
	sum := sha256.Sum256(s.Public())
	if KeyID(s.Public()) != hex.EncodeToString(sum[:]) || s.KeyID() != KeyID(s.Public()) || len(s.KeyID()) != 64 {
		t.Errorf("KeyID = %s", KeyID(s.Public()))
	}
}

// TestPublicKeyPEM: the PEM round-trips, is PKIX that x509 reads, and
// other keys and blocks are refused with a message that names them.
func TestPublicKeyPEM(t *testing.T) {
	s := mustSigner(t, 1)
	data := MarshalPublicKey(s.Public())
	if !bytes.HasPrefix(data, []byte("-----BEGIN PUBLIC KEY-----\n")) {
		t.Fatalf("MarshalPublicKey = %q", data)
	}
	pub, err := ParsePublicKey(data)
	if err != nil || !pub.Equal(s.Public()) {
		t.Fatalf("ParsePublicKey = %v, %v", pub, err)
	}
	if MarshalPublicKey([]byte("short")) != nil {
		t.Error("MarshalPublicKey of a short key is not nil")
	}

	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024) // small: only its type matters
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	encode := func(typ string, key any) []byte {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"an RSA key", string(encode("PUBLIC KEY", &rsaKey.PublicKey)), "is a RSA key, not ed25519"},
		{"an ECDSA key", string(encode("PUBLIC KEY", &ecKey.PublicKey)), "is a ECDSA key, not ed25519"},
		{"a private key block", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})), `"PRIVATE KEY", not a "PUBLIC KEY"`},
		{"not PEM", "ssh-ed25519 AAAA...", "not PEM"},
		{"a broken PKIX", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}})), "cannot parse"},
	} {
		_, err := ParsePublicKey([]byte(tc.data))
		if !errors.Is(err, refusal.Invalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParsePublicKey = %v, want an Invalid error saying %q", tc.name, err, tc.want)
		}
	}
}
