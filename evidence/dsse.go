//go:build !cordon_front

package evidence

import (
	"context"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// The DSSE library's envelopes, signer and verifier: this file is what
// cordon's front end (the build tag cordon_front), which signs and
// verifies no receipt, leaves out (dsse_front.go): the library's
// x/crypto/ssh costs every process ~0.1 ms of initialisation.

// envelope is a receipt's DSSE envelope.
type envelope = dsse.Envelope

type envelopeSigner = *dsse.EnvelopeSigner

func newEnvelopeSigner(s *Signer) (envelopeSigner, error) {
	return dsse.NewEnvelopeSigner(dsseSigner{s})
}

// signPayload signs body, a statement, into an envelope of [PayloadType].
func signPayload(es envelopeSigner, body []byte) (*envelope, error) {
	return es.SignPayload(context.Background(), PayloadType, body)
}

type envelopeVerifier = *dsse.EnvelopeVerifier

func newEnvelopeVerifier(v dsseVerifier) (envelopeVerifier, error) {
	return dsse.NewEnvelopeVerifier(v)
}

// verifyEnvelope verifies env's signature over its payload and type.
func verifyEnvelope(ev envelopeVerifier, env *envelope) error {
	_, err := ev.Verify(context.Background(), env)
	return err
}
