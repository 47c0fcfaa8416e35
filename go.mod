module github.com/cordon-run/cordon

go 1.26.0

require (
	github.com/spf13/pflag v1.1.0
	golang.org/x/sys v0.50.0
)

require github.com/tetratelabs/wazero v1.12.0
