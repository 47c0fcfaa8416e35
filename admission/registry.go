package admission

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/keystore"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// The registry's layout beneath the workspace's .efferent directory:
//
//	tools/objects/sha256/HEX/manifest.json     the artifact's identity
//	tools/objects/sha256/HEX/declaration.json  the declaration, canonical JSON
//	tools/objects/sha256/HEX/files/...         the tool's files, read-only
//	tools/grants/NAME.json                     the tool's Grant (names HEX)
//	tools/staging/...                          registrations being built
//	tools/lock                                 one registration at a time
//
// Objects are content-addressed and never change once published; a tool
// is registered when its grant file is renamed into grants/, one atomic
// step.
//
// A grant file is an envelope: the grant and an HMAC-SHA256 over the
// workspace, the tool's name and the grant, under the registry key of
// cordon's per-user key store (package keystore), outside every workspace
// and hidden from every sandbox. Harness state inside a workspace is
// read-only to the tools that run there, but a tool of an enclosing
// workspace, or any process of the user, could write it: a grant that is
// forged, edited, or moved from another tool or workspace fails the MAC
// and is refused ([refusal.UntrustedState]). The object a grant names is
// verified by its digest, which the MAC covers.
const (
	registryDir = "tools"
	objectsDir  = "objects/sha256"
	grantsDir   = "grants"
	stagingDir  = "staging"
	filesDir    = "files"
)

// RegistryConfig configures a [Registry].
type RegistryConfig struct {
	// Workspace is the workspace whose harness state holds the registry.
	Workspace string
	// Harness is the harness configuration: the registry lives in its
	// first harness directory, the key that authenticates it in its
	// state directory (zero: [harness.Default]).
	Harness harness.Config
	// Logger receives one record per change; nil discards.
	Logger *slog.Logger
}

// registryKey is the name of the key that authenticates grants.
const registryKey = "registry"

// Registry is the store of admitted tools under .efferent/tools. It is
// harness state: cordon writes it itself, with descriptor-relative
// operations that never follow a symlink, never through the workspace
// guard (which refuses harness state by design).
type Registry struct {
	root   string // canonical workspace
	dir    string // absolute path of the tools directory
	harn   string
	state  string // the per-user state directory holding the key store
	logger *slog.Logger

	keysOnce sync.Once
	keys     *keystore.Store
	keysErr  error
	curOnce  sync.Once
	cur      string // currentPath
	curErr   error
	// fail, when set, is called before each step of Register; an error
	// stops the registration there (tests inject failures with it).
	fail func(step string) error
}

// OpenRegistry returns the registry of the workspace.
func OpenRegistry(cfg RegistryConfig) (*Registry, error) {
	root, err := dirfd.Canonical(cfg.Workspace)
	if err != nil {
		return nil, registryErr("open", "", err)
	}
	hc := cfg.Harness
	if hc.IsZero() {
		hc = harness.Default()
	}
	if err := hc.Validate(); err != nil {
		return nil, err
	}
	if err := hc.CheckWorkspace(root); err != nil {
		return nil, err
	}
	h := hc.RegistryDir()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Registry{root: root, harn: h, state: hc.StateDir(), dir: filepath.Join(root, h, registryDir), logger: cfg.Logger}, nil
}

// keyStore opens the per-user key store once.
func (r *Registry) keyStore() (*keystore.Store, error) {
	r.keysOnce.Do(func() { r.keys, r.keysErr = keystore.Open(r.state) })
	return r.keys, r.keysErr
}

// The current grant of each tool, by its MAC, is recorded in the per-user
// state directory, under registry/<workspace key>/<tool>: a grant whose
// MAC is authentic but not current — an older grant, or a removed tool's,
// restored from a copy a tool kept — is refused.
const currentDir = "registry"

// currentPath returns the directory of this workspace's records, made and
// checked once a registry.
func (r *Registry) currentPath() (string, error) {
	r.curOnce.Do(func() {
		sum := sha256.Sum256([]byte(r.root))
		r.cur, r.curErr = userdir.EnsurePath(r.state, currentDir, hex.EncodeToString(sum[:16]))
	})
	return r.cur, r.curErr
}

// current returns the MACs a grant of name may have: the current one,
// and during a registration the one it replaces.
func (r *Registry) current(name string) ([]string, error) {
	dir, err := r.currentPath()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}

// setCurrent records macs as the grants of name may have (none: the tool
// is removed).
func (r *Registry) setCurrent(name string, macs ...string) error {
	dir, err := r.currentPath()
	if err != nil {
		return err
	}
	target := filepath.Join(dir, name)
	if len(macs) == 0 {
		if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+name+"."+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strings.Join(macs, "\n") + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// grantEnvelope is a grant file: the grant's JSON and its MAC.
type grantEnvelope struct {
	Grant json.RawMessage `json:"grant"`
	MAC   string          `json:"mac"`
}

// mac authenticates a grant's JSON for the tool name in this workspace.
func (r *Registry) mac(name string, grant []byte, create bool) (string, error) {
	ks, err := r.keyStore()
	if err != nil {
		return "", err
	}
	sum, err := ks.MAC(registryKey, create, []byte("cordon/grant/v1"), []byte(r.root), []byte(name), grant)
	if err != nil {
		return "", err
	}
	return "hmac-sha256:" + hex.EncodeToString(sum), nil
}

// Dir returns the registry's directory.
func (r *Registry) Dir() string { return r.dir }

// Workspace returns the canonical workspace of the registry.
func (r *Registry) Workspace() string { return r.root }

// String describes the registry.
func (r *Registry) String() string { return "tool registry " + r.dir }

// RegistryError is a registry that cannot be read or written.
type RegistryError struct {
	Op   string // "register", "load", "list"
	Tool string
	Err  error
}

func (e *RegistryError) Error() string {
	if e.Tool != "" {
		return fmt.Sprintf("cannot %s tool %q in the tool registry: %v", e.Op, e.Tool, e.Err)
	}
	return fmt.Sprintf("cannot %s the tool registry: %v", e.Op, e.Err)
}

// Unwrap returns the cause and [ErrRegistry]; a cause with a kind of its
// own ([ErrUnknownTool], [refusal.UntrustedState]) names the error's kind.
func (e *RegistryError) Unwrap() []error {
	if refusal.Of(e.Err) != nil {
		return []error{e.Err, ErrRegistry}
	}
	return []error{ErrRegistry, e.Err}
}

var errNotExist = fs.ErrNotExist

func registryErr(op, tool string, err error) error {
	return &RegistryError{Op: op, Tool: tool, Err: err}
}

// open opens (creating with create) the tools directory, walking from the
// workspace without following symlinks.
func (r *Registry) open(create bool) (*dirfd.Dir, error) {
	ws, err := dirfd.Open(r.root)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return ws.OpenPath(r.harn+"/"+registryDir, create, 0o755)
}

func (r *Registry) step(name string) error {
	if r.fail != nil {
		return r.fail(name)
	}
	return nil
}

// Register stores an admitted tool: its object (declaration, manifest,
// files) under its digest, then its grant under its name. It is all or
// nothing: after any failure the registry is as it was — the name keeps
// its old grant, if it had one, and no new object is left behind.
// Re-registering a name replaces its grant in the same atomic step; the
// grant it replaced is returned (nil for a new tool).
func (r *Registry) Register(adm *Admission) (replaced *Grant, err error) {
	g := adm.Grant
	if !validName(g.Tool) {
		return nil, registryErr("register", g.Tool, errors.New("invalid tool name"))
	}
	hexDigest, ok := strings.CutPrefix(g.Digest, "sha256:")
	if !ok || len(hexDigest) != 64 {
		return nil, registryErr("register", g.Tool, fmt.Errorf("invalid digest %q", g.Digest))
	}
	defer func() {
		if err != nil {
			err = registryErr("register", g.Tool, err)
			r.logger.Warn("registration failed", "tool", g.Tool, "err", err)
		}
	}()
	if err := r.step("open"); err != nil {
		return nil, err
	}
	tools, err := r.open(true)
	if err != nil {
		return nil, err
	}
	defer tools.Close()
	unlock, err := tools.Lock("lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	staging, err := tools.OpenDir(stagingDir, true, 0o755)
	if err != nil {
		return nil, err
	}
	defer staging.Close()
	objects, err := tools.OpenPath(objectsDir, true, 0o755)
	if err != nil {
		return nil, err
	}
	defer objects.Close()
	grants, err := tools.OpenDir(grantsDir, true, 0o755)
	if err != nil {
		return nil, err
	}
	defer grants.Close()

	// Build everything in a staging directory of our own.
	var rnd [8]byte
	rand.Read(rnd[:])
	stage := "reg-" + hex.EncodeToString(rnd[:])
	sd, err := staging.OpenDir(stage, true, 0o755)
	if err != nil {
		return nil, err
	}
	defer func() {
		sd.Close()
		if rerr := staging.RemoveAll(stage); rerr != nil && err == nil {
			err = rerr
		}
	}()
	exists, err := objects.Exists(hexDigest)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := r.stageObject(sd, adm); err != nil {
			return nil, err
		}
	}
	grant, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	mac, err := r.mac(g.Tool, grant, true)
	if err != nil {
		return nil, err
	}
	envelope, err := json.MarshalIndent(grantEnvelope{Grant: grant, MAC: mac}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := r.step("stage-grant"); err != nil {
		return nil, err
	}
	if err := sd.WriteFile("grant.json", append(envelope, '\n'), 0o444); err != nil {
		return nil, err
	}

	// Publish: the object (if new), then the grant. Undo the object if the
	// grant cannot follow it.
	if !exists {
		if err := r.step("publish-object"); err != nil {
			return nil, err
		}
		if err := sd.Rename("object", objects, hexDigest); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				objects.RemoveAll(hexDigest)
			}
		}()
		if err := r.step("sync-objects"); err != nil {
			return nil, err
		}
		if err := objects.Sync(); err != nil {
			return nil, err
		}
	}
	old, _ := r.readGrant(grants, g.Tool)
	if old != nil && old.Tool != g.Tool {
		old = nil
	}
	// The new grant is made current with the old one first, so that
	// either file authenticates until the rename is done.
	was, err := r.current(g.Tool)
	if err != nil {
		return nil, err
	}
	if err := r.setCurrent(g.Tool, append(slices.Clone(was), mac)...); err != nil {
		return nil, err
	}
	if err := r.step("publish-grant"); err != nil {
		r.setCurrent(g.Tool, was...)
		return nil, err
	}
	if err := sd.Rename("grant.json", grants, g.Tool+".json"); err != nil {
		r.setCurrent(g.Tool, was...)
		return nil, err
	}
	if err := r.setCurrent(g.Tool, mac); err != nil {
		r.logger.Warn("cannot record the current grant", "tool", g.Tool, "err", err)
	}
	if err := grants.Sync(); err != nil {
		r.logger.Warn("cannot sync the grants directory", "err", err)
	}
	r.logger.Info("registered", "tool", g.Tool, "digest", g.Digest)
	// The old object goes when nothing names it any more.
	if old != nil && old.Digest != g.Digest {
		r.collect(tools, objects, old.Digest)
	}
	return old, nil
}

// stageObject writes the object directory "object" into sd.
func (r *Registry) stageObject(sd *dirfd.Dir, adm *Admission) error {
	if err := r.step("stage-object"); err != nil {
		return err
	}
	obj, err := sd.OpenDir("object", true, 0o755)
	if err != nil {
		return err
	}
	defer obj.Close()
	var decl bytes.Buffer
	enc := json.NewEncoder(&decl)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(adm.Declaration); err != nil {
		return err
	}
	if err := r.step("stage-declaration"); err != nil {
		return err
	}
	if err := obj.WriteFile("declaration.json", decl.Bytes(), 0o444); err != nil {
		return err
	}
	if err := obj.WriteFile("manifest.json", adm.Manifest, 0o444); err != nil {
		return err
	}
	files, err := obj.OpenDir(filesDir, true, 0o755)
	if err != nil {
		return err
	}
	defer files.Close()
	for _, f := range adm.Files {
		if err := r.step("stage-file"); err != nil {
			return err
		}
		dir, base := path.Split(f.Path)
		target := files
		if dir != "" {
			target, err = files.OpenPath(strings.TrimSuffix(dir, "/"), true, 0o755)
			if err != nil {
				return err
			}
		}
		mode := uint32(0o444)
		if f.Exec {
			mode = 0o555
		}
		err = target.WriteFile(base, f.Data, mode)
		if target != files {
			target.Close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// collect removes the object hexDigest ("sha256:...") when no grant names
// it. Failing to is harmless: an unnamed object is never run.
func (r *Registry) collect(tools, objects *dirfd.Dir, digest string) {
	grants, err := tools.OpenDir(grantsDir, false, 0)
	if err != nil {
		return
	}
	defer grants.Close()
	names, err := grants.Names()
	if err != nil {
		return
	}
	for _, n := range names {
		if name, ok := strings.CutSuffix(n, ".json"); ok {
			if g, err := r.readGrant(grants, name); err == nil && g.Digest == digest {
				return
			}
		}
	}
	if err := objects.RemoveAll(strings.TrimPrefix(digest, "sha256:")); err != nil {
		r.logger.Warn("cannot remove an unused tool object", "digest", digest, "err", err)
	}
}

// readGrant reads and authenticates the grant of name: its MAC must hold
// under this user's registry key for this workspace and name, and the
// grant must name the tool it is filed under.
func (r *Registry) readGrant(grants *dirfd.Dir, name string) (*Grant, error) {
	data, _, err := grants.ReadFile(name+".json", MaxDeclarationSize)
	if err != nil {
		return nil, err
	}
	untrusted := func(why string, args ...any) error {
		return refusal.Errorf(refusal.UntrustedState, "refusing the grant of tool %q in %s — %s; admit the tool again", name, r.dir, fmt.Sprintf(why, args...))
	}
	var env grantEnvelope
	if err := json.Unmarshal(data, &env); err != nil || len(env.Grant) == 0 || env.MAC == "" {
		return nil, untrusted("it is not an authenticated grant (no MAC)")
	}
	// The MAC is over the grant's compact JSON (the file indents it).
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.Grant); err != nil {
		return nil, untrusted("it is not an authenticated grant (%v)", err)
	}
	want, err := r.mac(name, compact.Bytes(), false)
	if err != nil {
		if errors.Is(err, refusal.UntrustedState) {
			return nil, untrusted("this user's key store cannot authenticate it: %v", err)
		}
		return nil, err
	}
	if !hmac.Equal([]byte(want), []byte(env.MAC)) {
		return nil, untrusted("its MAC does not match: it was forged, edited, or moved here from another tool or workspace")
	}
	cur, err := r.current(name)
	if err != nil {
		return nil, untrusted("this user's record of its current grant cannot be read: %v", err)
	}
	if !slices.Contains(cur, env.MAC) {
		return nil, untrusted("it is not the grant last admitted for this tool here (an older or removed tool's grant, restored from a copy)")
	}
	var g Grant
	if err := json.Unmarshal(env.Grant, &g); err != nil {
		return nil, fmt.Errorf("grant of %q: %v", name, err)
	}
	if g.Tool != name {
		return nil, untrusted("it names tool %q", g.Tool)
	}
	return &g, nil
}

// Remove removes the tool name: its grant goes in one step, then its
// object when no other grant names it. An unknown name is
// [ErrUnknownTool].
func (r *Registry) Remove(name string) (*Grant, error) {
	if !validName(name) {
		return nil, &RegistryError{Op: "remove", Tool: name, Err: ErrUnknownTool}
	}
	tools, err := r.open(false)
	if err != nil {
		if errors.Is(err, errNotExist) {
			return nil, &RegistryError{Op: "remove", Tool: name, Err: ErrUnknownTool}
		}
		return nil, registryErr("remove", name, err)
	}
	defer tools.Close()
	unlock, err := tools.Lock("lock")
	if err != nil {
		return nil, registryErr("remove", name, err)
	}
	defer unlock()
	grants, err := tools.OpenDir(grantsDir, false, 0)
	if err != nil {
		if errors.Is(err, errNotExist) {
			return nil, &RegistryError{Op: "remove", Tool: name, Err: ErrUnknownTool}
		}
		return nil, registryErr("remove", name, err)
	}
	defer grants.Close()
	if ok, err := grants.Exists(name + ".json"); err != nil || !ok {
		if err == nil {
			err = ErrUnknownTool
		}
		return nil, &RegistryError{Op: "remove", Tool: name, Err: err}
	}
	old, _ := r.readGrant(grants, name) // a forged grant is removed all the same
	if err := grants.Remove(name + ".json"); err != nil {
		return nil, registryErr("remove", name, err)
	}
	if err := r.setCurrent(name); err != nil {
		r.logger.Warn("cannot clear the record of the removed grant", "tool", name, "err", err)
	}
	grants.Sync()
	r.logger.Info("removed", "tool", name)
	if old != nil {
		if objects, err := tools.OpenPath(objectsDir, false, 0); err == nil {
			r.collect(tools, objects, old.Digest)
			objects.Close()
		}
	}
	return old, nil
}

// List returns the grants of all registered tools, by name. A grant that
// cannot be read or authenticated is left out of them and reported among
// refused, one error per tool; err means the registry cannot be listed.
func (r *Registry) List() (grants []*Grant, refused []error, err error) {
	tools, err := r.open(false)
	if err != nil {
		if errors.Is(err, errNotExist) {
			return nil, nil, nil
		}
		return nil, nil, registryErr("list", "", err)
	}
	defer tools.Close()
	dir, err := tools.OpenDir(grantsDir, false, 0)
	if err != nil {
		if errors.Is(err, errNotExist) {
			return nil, nil, nil
		}
		return nil, nil, registryErr("list", "", err)
	}
	defer dir.Close()
	names, err := dir.Names()
	if err != nil {
		return nil, nil, registryErr("list", "", err)
	}
	slices.Sort(names)
	for _, n := range names {
		name, ok := strings.CutSuffix(n, ".json")
		if !ok || !validName(name) {
			continue
		}
		g, err := r.readGrant(dir, name)
		if err != nil {
			refused = append(refused, registryErr("list", name, err))
			continue
		}
		grants = append(grants, g)
	}
	return grants, refused, nil
}

// Tool is a registered tool, loaded and verified.
type Tool struct {
	Grant       *Grant
	Declaration *Declaration
	Files       []File
	// Dir is the absolute path of the tool's files, read-only.
	Dir string
}

// Load reads the registered tool name and verifies it: its declaration
// and files must still hash to the digest its grant names.
func (r *Registry) Load(name string) (*Tool, error) {
	if !validName(name) {
		return nil, &RegistryError{Op: "load", Tool: name, Err: ErrUnknownTool}
	}
	tools, err := r.open(false)
	if err != nil {
		if errors.Is(err, errNotExist) {
			return nil, &RegistryError{Op: "load", Tool: name, Err: ErrUnknownTool}
		}
		return nil, registryErr("load", name, err)
	}
	defer tools.Close()
	grants, err := tools.OpenDir(grantsDir, false, 0)
	if err == nil {
		defer grants.Close()
	}
	var g *Grant
	if err == nil {
		g, err = r.readGrant(grants, name)
	}
	if err != nil {
		if errors.Is(err, errNotExist) {
			return nil, &RegistryError{Op: "load", Tool: name, Err: ErrUnknownTool}
		}
		return nil, registryErr("load", name, err)
	}
	hexDigest := strings.TrimPrefix(g.Digest, "sha256:")
	obj, err := tools.OpenPath(objectsDir+"/"+hexDigest, false, 0)
	if err != nil {
		return nil, registryErr("load", name, err)
	}
	defer obj.Close()
	data, _, err := obj.ReadFile("declaration.json", MaxDeclarationSize)
	if err != nil {
		return nil, registryErr("load", name, err)
	}
	d, err := Decode(data, FormatJSON)
	if err != nil {
		return nil, registryErr("load", name, err)
	}
	t := &Tool{Grant: g, Declaration: d, Dir: filepath.Join(r.dir, objectsDir, hexDigest, filesDir)}
	names := d.Files
	if d.Kind == KindWasm {
		names = []string{d.Module}
	}
	if len(names) > 0 {
		files, err := obj.OpenDir(filesDir, false, 0)
		if err != nil {
			return nil, registryErr("load", name, err)
		}
		defer files.Close()
		for _, n := range names {
			clean := path.Clean(n)
			dir, base := path.Split(clean)
			target := files
			if dir != "" {
				if target, err = files.OpenPath(strings.TrimSuffix(dir, "/"), false, 0); err != nil {
					return nil, registryErr("load", name, err)
				}
			}
			data, mode, err := target.ReadFile(base, MaxFileSize)
			if target != files {
				target.Close()
			}
			if err != nil {
				return nil, registryErr("load", name, err)
			}
			t.Files = append(t.Files, newFile(clean, data, mode&0o111 != 0))
		}
		slices.SortFunc(t.Files, func(x, y File) int { return strings.Compare(x.Path, y.Path) })
	}
	if _, digest := manifestOf(d, t.Files); digest != g.Digest {
		return nil, registryErr("load", name, fmt.Errorf("its declaration or files no longer match the digest %s it was admitted with", g.Digest))
	}
	return t, nil
}
