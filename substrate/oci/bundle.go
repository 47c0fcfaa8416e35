package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cordon-run/cordon/substrate/bwrap"
)

// WriteBundle writes the bundle of argv in the sandbox sb to dir, which
// must not exist, for another engine to run later: rootfs (an empty
// directory), config.json and, for each placeholder of the sandbox's
// session (an absent protected path, which cordon's own runs make for
// the length of a run and remove after it), a stand-in under
// placeholders/ — an empty directory, or a file with the placeholder's
// content — bound read-only where the placeholder was. The engine then
// makes the mount point of each in the workspace, as an empty directory
// or file, and leaves it there after the run: cordon's runs remove
// theirs, another engine does not. The other sources are the workspace's
// own paths, resolved when the engine runs the bundle: cordon pins .git,
// its objects and refs only for the length of its own runs. A bundle
// that cannot be written whole is removed.
func WriteBundle(sb *bwrap.Sandbox, argv []string, o Options, dir string) (err error) {
	s, err := Spec(sb, argv, o)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("oci: cannot make the bundle directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := os.Mkdir(filepath.Join(dir, "rootfs"), 0o755); err != nil {
		return err
	}
	stand := map[string]string{} // placeholder → its stand-in in the bundle
	for i, p := range sb.Placeholders() {
		if i == 0 {
			if err := os.Mkdir(filepath.Join(dir, "placeholders"), 0o755); err != nil {
				return err
			}
		}
		rel := filepath.Join("placeholders", strconv.Itoa(i)) // relative to the bundle, wherever it goes
		in := filepath.Join(dir, rel)
		if p.Dir {
			err = os.Mkdir(in, 0o755)
		} else {
			err = os.WriteFile(in, []byte(p.Content), 0o444)
		}
		if err != nil {
			return err
		}
		stand[p.Path] = rel
	}
	for i, m := range s.Mounts {
		if in, ok := stand[m.Source]; ok && m.Type == "bind" && m.Destination == m.Source {
			s.Mounts[i].Source = in
		}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(data, '\n'), 0o644)
}
