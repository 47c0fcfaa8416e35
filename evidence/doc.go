// Package evidence writes and verifies cordon's receipts: signed records
// of what a probe observed when it tried an escape for real, and of what a
// run ran under which grant. A receipt is an in-toto Statement v1
// ([Statement], predicate [Receipt]) in a DSSE envelope signed with an
// ed25519 key, so that tools outside cordon can read and check it; the
// receipts of one workspace form a hash-chained log ([Log]) that
// [Verify] checks end to end.
//
// # Keys
//
// A [Signer] is an ed25519 key derived from a 32-byte seed that cordon
// keeps in its per-user key store. Signatures name the key by [KeyID],
// the hex SHA-256 of the raw public key; [MarshalPublicKey] exports the
// public key as PEM (PKIX) for someone on another machine, and
// [ParsePublicKey] reads it back. Envelopes are made and checked by the
// DSSE library of secure-systems-lab, which computes the pre-authentication
// encoding (PAE) that is signed: the payload type and the payload, so
// that neither can be changed on its own.
//
// # The log
//
// The log is a directory (cordon's is <workspace>/.foundry/evidence) with
// one file per receipt, "%08d.json" by sequence number from 1, holding the
// envelope's JSON and a newline. A receipt's digest is "sha256:" and the
// hex SHA-256 of its file; receipt n names the digest of receipt n-1 in
// its Previous (and the digest of that one's payload in PreviousPayload),
// so that editing, removing or reordering one receipt breaks the chain.
// [OpenLogAt] opens the directory from the workspace one component at a
// time with O_NOFOLLOW, creating what is missing: a symlink planted on the
// way is refused, never followed.
//
// A second, trusted directory that only the user can write — in cordon's
// per-user state, outside every workspace and every sandbox — holds the
// lock that every writer takes and a small file with the log's [Head]
// (the log's ID, the last receipt's sequence and digests) and an index of
// each probe's latest receipt ([ProbeIndex]). The head is what lets
// [Verify] tell a log whose last receipts were deleted, and the index is
// what lets a caller find fresh evidence without reading the log.
//
// Every log has an ID, 16 random bytes in hex, made by its first append
// and kept in its head; every receipt names it ([Receipt].Log). Receipts
// are bound to their log by it: a genuine receipt of another log of the
// same key, spliced into this one (after its head, say), names another ID
// and is neither adopted by an append nor passed by [Verify]
// ([ForeignLog]). A whole log copied into a workspace that never had one
// has no head there: it was not written there, appends refuse it and
// [Log.Verify] reports it ([NoHead]) until [Reset] moves it aside.
//
// [Log.Append] takes the lock (flock(2), so that goroutines and
// processes alike wait their turn), reads the head, writes the receipt to
// a temporary file, syncs it, links it to its name with link(2) — which
// never replaces a file — and syncs the directory; then it records the
// new head, replacing the head file by rename. The first append records
// the new log's ID before it writes receipt 1. A crash leaves the log
// either without the receipt or with a receipt the next append adopts.
//
// [Reset] moves a log and its head aside — renamed, never deleted — so
// that the next append begins a new log with a new ID.
//
// # Verification
//
// [Verify] reads every file of the log directory and reports a [Problem]
// of a [Kind] for each receipt that does not hold: a file that is not a
// receipt, a file that is torn ([Unreadable]), an edited payload or
// signature, a signature by another key, a receipt in the wrong file
// ([Reordered]), a receipt of another log ([ForeignLog]), a receipt
// missing from the middle ([Gap]), a chain that does not join
// ([BrokenChain]), and with the head, a log that ends early
// ([Truncated]), goes on past it ([Inserted]) or ends with another receipt
// ([Replaced]); [Log.Verify] reports a log it has no head for
// ([NoHead]). [ReadLog] reads the receipts without verifying them.
//
// # Limitations
//
//   - Without the head (verifying a log copied to another machine, with
//     the public key alone), receipts deleted from the end of the log
//     cannot be detected: what remains is a valid, shorter log; nor can
//     whether the log was written for the workspace it is in.
//   - A log moved with its workspace, or whose head was lost with
//     cordon's state, is refused like a copied one: it cannot be told
//     from one. Its receipts still verify with the key alone; [Reset]
//     moves it aside and the workspace starts a new log.
//   - Whoever holds the key can write a whole new log that verifies; the
//     head in the trusted directory still tells its end from the one it
//     replaced, but not a log rewritten by a process that can also write
//     the trusted directory (this user, outside the sandbox).
//   - When a receipt's signature does not verify, whether its payload or
//     its signature was edited is told from the receipt after it (or the
//     head); without either, the report says [BadSignature].
//   - Appends continue from the head the trusted directory records, so a
//     log that was tampered with stays tampered with — every later
//     verification reports it — until [Reset] moves the log and its head
//     aside.
//   - [Verify] reads the whole log: it costs an ed25519 verification and
//     two JSON decodings per receipt (about 0.25 ms each on a small
//     cloud VM), so a log of thousands of receipts takes a second or so.
//   - [Verify] on its own reads the files and the head without the
//     writers' lock: run it while another process appends, and an append
//     under way can show as [Inserted]. [Log.Verify] holds the lock.
//   - [OpenLogAt], [VerifyAt], [ReadLogAt] and [Reset] open their root
//     (cordon's workspace, which it resolved) as given, and follow no
//     symlink below it; [OpenLog], [Verify] and [ReadLog] walk an absolute
//     path from the root directory, so a symlink anywhere in it is
//     refused (resolve it first).
//   - A [Log] keeps its directory open; an append checks that the path
//     still names that directory, and refuses one moved aside or replaced
//     since (open the log again).
//   - Linux and other Unix systems only (flock, link, openat).
package evidence
