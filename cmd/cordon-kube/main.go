// Command cordon-kube renders a prepared sandbox as a Kubernetes Pod: the
// program behind cordon oci pod, which prepares the sandbox under its
// grant and hands it here. It is a program of its own so that the
// Kubernetes API's packages, and the start-up time they cost, stay out of
// every other cordon command.
//
// It reads one request from standard input, writes the manifest to the
// request's directory (which must not exist) and prints one JSON object:
// the Pod's name, the seccomp profile's file name and what the Pod does
// not enforce; on failure, {"error": "RenderFailed", "message": ...} and
// exit status 1.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/cordon-run/cordon/substrate/oci"
	"github.com/cordon-run/cordon/substrate/oci/kube"
)

const usage = `usage: cordon-kube render < REQUEST.json

The program behind cordon oci pod (see cordon oci pod --help): it renders the
sandbox of a request cordon made as a Kubernetes Pod.`

func main() {
	if len(os.Args) != 2 || os.Args[1] != "render" {
		if len(os.Args) == 2 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
			fmt.Println(usage)
			return
		}
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	resp, err := render(os.Stdin)
	if err != nil {
		json.NewEncoder(os.Stdout).Encode(map[string]string{"error": "RenderFailed", "message": err.Error()})
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(resp)
}

func render(r io.Reader) (*oci.PodResponse, error) {
	dec := json.NewDecoder(io.LimitReader(r, 64<<20))
	dec.DisallowUnknownFields()
	var req oci.PodRequest
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("cordon-kube: the request: %w", err)
	}
	if req.Sandbox == nil || req.Out == "" {
		return nil, fmt.Errorf("cordon-kube: the request names no sandbox or no directory")
	}
	m, err := kube.Render(req.Sandbox, req.Options)
	if err != nil {
		return nil, err
	}
	if err := m.Write(req.Out); err != nil {
		return nil, err
	}
	return &oci.PodResponse{Dir: req.Out, Pod: m.Pod.Name, Seccomp: m.SeccompName, Unenforced: m.Unenforced}, nil
}
