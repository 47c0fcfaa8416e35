"""verify_dsse.py PUBLIC_KEY_PEM ENVELOPE...

Checks cordon receipts with code that shares nothing with cordon's Go: it
reads the ed25519 public key from its PEM (PKIX, RFC 8410), reads each
DSSE envelope (a JSON file), computes the DSSE pre-authentication encoding
itself and has python-securesystemslib verify the one signature over it.
It also checks that the signature's keyid is the hex SHA-256 of the raw
public key and that the payload is an in-toto Statement v1.

It prints one line per envelope, "ok KEYID SEQUENCE" or "rejected: WHY".
Exit status: 0 every envelope verifies, 1 one does not, 2 the check could
not be made (a missing module, a bad key, a bad argument).
"""

import base64
import binascii
import hashlib
import json
import sys

try:
    from securesystemslib.signer import Signature, SSlibKey
    from securesystemslib import exceptions
except ImportError as e:  # the Go test skips (or fails in CI) on this
    print(f"cannot import securesystemslib: {e}", file=sys.stderr)
    sys.exit(2)

# The DER of an ed25519 SubjectPublicKeyInfo is this prefix and the 32
# bytes of the key (RFC 8410, section 10.1).
ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


class Rejected(Exception):
    """The envelope does not verify."""


def pae(payload_type: bytes, body: bytes) -> bytes:
    """DSSE v1 PAE: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(body), body)


def raw_public_key(pem: str) -> bytes:
    lines = pem.strip().splitlines()
    if not lines or lines[0] != "-----BEGIN PUBLIC KEY-----" or lines[-1] != "-----END PUBLIC KEY-----":
        raise ValueError("not a PEM PUBLIC KEY block")
    der = base64.b64decode("".join(lines[1:-1]), validate=True)
    if len(der) != len(ED25519_SPKI_PREFIX) + 32 or not der.startswith(ED25519_SPKI_PREFIX):
        raise ValueError("not an ed25519 SubjectPublicKeyInfo")
    return der[len(ED25519_SPKI_PREFIX):]


def verify(path: str, key: SSlibKey) -> str:
    """Returns "KEYID SEQUENCE" of the envelope at path, or raises Rejected."""
    with open(path, "rb") as f:
        try:
            env = json.loads(f.read())
            payload_type = env["payloadType"].encode()
            body = base64.b64decode(env["payload"], validate=True)
            sigs = env["signatures"]
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as e:
            raise Rejected(f"not a DSSE envelope: {e}")
    if len(sigs) != 1:
        raise Rejected(f"{len(sigs)} signatures")
    if sigs[0].get("keyid") != key.keyid:
        raise Rejected(f"keyid {sigs[0].get('keyid')!r}, not {key.keyid}")
    try:
        sig = base64.b64decode(sigs[0]["sig"], validate=True)
    except (binascii.Error, ValueError) as e:
        raise Rejected(f"the signature is not base64: {e}")
    try:
        key.verify_signature(Signature(key.keyid, sig.hex()), pae(payload_type, body))
    except exceptions.UnverifiedSignatureError as e:
        raise Rejected(str(e))
    except exceptions.VerificationError as e:
        raise Rejected(f"{e}: {e.__cause__}")
    statement = json.loads(body)
    if statement.get("_type") != STATEMENT_TYPE:
        raise Rejected(f"the payload's _type is {statement.get('_type')!r}, not {STATEMENT_TYPE}")
    return f"{key.keyid} {statement['predicate']['sequence']}"


def main(argv) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            raw = raw_public_key(f.read())
    except (OSError, ValueError, binascii.Error) as e:
        print(f"cannot read the public key {argv[1]}: {e}", file=sys.stderr)
        return 2
    keyid = hashlib.sha256(raw).hexdigest()
    key = SSlibKey(keyid, "ed25519", "ed25519", {"public": raw.hex()})
    status = 0
    for path in argv[2:]:
        try:
            print("ok", verify(path, key))
        except Rejected as e:
            print(f"rejected: {path}: {e}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
