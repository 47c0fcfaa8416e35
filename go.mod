module github.com/cordon-run/cordon

go 1.26.0

require (
	github.com/google/jsonschema-go v0.4.3
	github.com/spf13/pflag v1.1.0
	github.com/tetratelabs/wazero v1.12.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.50.0
)
