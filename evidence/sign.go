package evidence

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"

	"github.com/cordon-run/cordon/refusal"
)

// pemType is the PEM block type of an exported public key (PKIX, as
// openssl and Python's cryptography write it).
const pemType = "PUBLIC KEY"

// Signer signs receipts with an ed25519 key.
type Signer struct {
	// The key is derived on first use: the first ed25519 operation of a
	// process costs milliseconds (Go builds its base-point tables), and a
	// run that finds fresh evidence in the index signs and verifies
	// nothing.
	seed  []byte
	once  sync.Once
	priv  ed25519.PrivateKey
	pub   ed25519.PublicKey
	keyID string
	env   envelopeSigner
	err   error
}

// NewSigner returns the signer whose ed25519 key is derived from seed
// (32 bytes, [ed25519.SeedSize]): the same seed is the same key. cordon
// keeps the seed in its per-user key store.
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, refusal.Errorf(refusal.Invalid, "evidence: an ed25519 seed is %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	return &Signer{seed: bytes.Clone(seed)}, nil
}

// derive makes the key from the seed, once.
func (s *Signer) derive() error {
	s.once.Do(func() {
		s.priv = ed25519.NewKeyFromSeed(s.seed)
		s.pub = s.priv.Public().(ed25519.PublicKey)
		s.keyID = KeyID(s.pub)
		s.env, s.err = newEnvelopeSigner(s)
	})
	return s.err
}

// Public returns the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { s.derive(); return s.pub }

// KeyID returns the signer's key ID, [KeyID] of its public key.
func (s *Signer) KeyID() string { s.derive(); return s.keyID }

// KeyID is the key ID of pub as receipts name it in their signature:
// the hex SHA-256 of the raw 32-byte public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// sign signs st (whose Type it sets) into a DSSE envelope with
// [PayloadType]. It returns the envelope and its payload, the statement's
// JSON.
func (s *Signer) sign(st Statement) (envelope, []byte, error) {
	if err := s.derive(); err != nil {
		return envelope{}, nil, err
	}
	st.Type = StatementType
	body, err := json.Marshal(st)
	if err != nil {
		return envelope{}, nil, fmt.Errorf("evidence: cannot encode receipt %d: %w", st.Predicate.Sequence, err)
	}
	env, err := signPayload(s.env, body)
	if err != nil {
		return envelope{}, nil, fmt.Errorf("evidence: cannot sign receipt %d: %w", st.Predicate.Sequence, err)
	}
	return *env, body, nil
}

// dsseSigner is the signer as the DSSE library's [dsse.Signer].
type dsseSigner struct{ s *Signer }

func (d dsseSigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(d.s.priv, data), nil
}

func (d dsseSigner) KeyID() (string, error) { return d.s.keyID, nil }

// dsseVerifier checks signatures by one public key, as the DSSE
// library's [dsse.Verifier].
type dsseVerifier struct {
	pub   ed25519.PublicKey
	keyID string
}

// verifier checks receipts' envelopes against one public key.
type verifier struct {
	dsseVerifier
	env envelopeVerifier
}

func newVerifier(pub ed25519.PublicKey) (*verifier, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, refusal.Errorf(refusal.Invalid, "evidence: an ed25519 public key is %d bytes, not %d", ed25519.PublicKeySize, len(pub))
	}
	v := &verifier{dsseVerifier: dsseVerifier{pub: pub, keyID: KeyID(pub)}}
	env, err := newEnvelopeVerifier(v.dsseVerifier)
	if err != nil {
		return nil, err
	}
	v.env = env
	return v, nil
}

// errBadSignature is an ed25519 signature that does not verify.
var errBadSignature = errors.New("the ed25519 signature does not verify")

func (v dsseVerifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errBadSignature
	}
	return nil
}

func (v dsseVerifier) KeyID() (string, error) { return v.keyID, nil }

func (v dsseVerifier) Public() crypto.PublicKey { return v.pub }

// sigCheck is what checking an envelope's one signature found.
type sigCheck int

const (
	sigOK        sigCheck = iota
	sigCount              // not exactly one signature
	sigNoKeyID            // the signature names no key
	sigForeign            // the signature names another key
	sigMalformed          // not base64, or not an ed25519 signature's size
	sigInvalid            // well formed, names this key, and does not verify
)

// check checks that env holds exactly one signature, that it names v's
// key and that it verifies over the envelope's payload and type (the DSSE
// library computes the PAE and calls [dsseVerifier.Verify]). The key ID
// and the signature's form are checked here first, so that a signature by
// another key, and a signature that was edited, are told apart.
func (v *verifier) check(env *envelope) sigCheck {
	if len(env.Signatures) != 1 {
		return sigCount
	}
	s := env.Signatures[0]
	switch {
	case s.KeyID == "":
		return sigNoKeyID
	case s.KeyID != v.keyID:
		return sigForeign
	}
	if raw, err := base64.StdEncoding.Strict().DecodeString(s.Sig); err != nil || len(raw) != ed25519.SignatureSize {
		return sigMalformed
	}
	if err := verifyEnvelope(v.env, env); err != nil {
		return sigInvalid
	}
	return sigOK
}

// MarshalPublicKey returns pub as a PEM "PUBLIC KEY" block (PKIX), the
// form [ParsePublicKey], openssl and other verifiers read; nil for a key
// that is not 32 bytes.
func MarshalPublicKey(pub ed25519.PublicKey) []byte {
	if len(pub) != ed25519.PublicKeySize {
		return nil
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil { // not reached: every ed25519 key of the right size encodes
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der})
}

// ParsePublicKey reads an ed25519 public key from a PEM "PUBLIC KEY"
// block, as [MarshalPublicKey] writes it. Other block types (a private
// key, a certificate) and other kinds of key (RSA, ECDSA) are refused.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, refusal.Errorf(refusal.Invalid, "evidence: the public key is not PEM (expected a %q block)", pemType)
	}
	if block.Type != pemType {
		return nil, refusal.Errorf(refusal.Invalid, "evidence: the PEM block is a %q, not a %q (an ed25519 public key)", block.Type, pemType)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, refusal.Errorf(refusal.Invalid, "evidence: cannot parse the public key: %w", err)
	}
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, refusal.Errorf(refusal.Invalid, "evidence: the public key is a %s key, not ed25519; receipts are signed with ed25519", keyKind(key))
	}
	return pub, nil
}

// keyKind names the algorithm of a public key x509 parsed.
func keyKind(key any) string {
	switch key.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "ECDSA"
	}
	return fmt.Sprintf("%T", key)
}
