//go:build cordon_front

package evidence

import "github.com/cordon-run/cordon/refusal"

// This file replaces dsse.go in cordon's front end (the build tag
// cordon_front), which links no DSSE library: it hands every command that
// signs or verifies a receipt to the full binary, so here signing and
// verifying refuse. An envelope keeps its JSON form.

type envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []signature `json:"signatures"`
}

type signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

var errNoDSSE = refusal.Errorf(refusal.SandboxUnavailable, "evidence: signing and verifying receipts needs the DSSE library, which this build of cordon (its front end, built with the tag cordon_front) does not link; use the full cordon binary")

type envelopeSigner struct{}

func newEnvelopeSigner(*Signer) (envelopeSigner, error) { return envelopeSigner{}, errNoDSSE }

func signPayload(envelopeSigner, []byte) (*envelope, error) { return nil, errNoDSSE }

type envelopeVerifier struct{}

func newEnvelopeVerifier(dsseVerifier) (envelopeVerifier, error) {
	return envelopeVerifier{}, errNoDSSE
}

func verifyEnvelope(envelopeVerifier, *envelope) error { return errNoDSSE }
