//go:build !linux

package roots

func copyTree(src, dst string, skip skipFunc) (string, error) { return "", errNotLinux }
