package capabilities_test

import (
	"fmt"

	"github.com/cordon-run/cordon/capabilities"
)

func ExampleParse() {
	c, _ := capabilities.Parse("output:65536")
	fmt.Println(c, c.Size())
	_, err := capabilities.Parse("net.connect:tcp:70000")
	fmt.Println(err)
	// Output:
	// output:64KiB 65536
	// capability "net.connect:tcp:70000": 70000 is out of range: it must be 1 to 65535
}

func ExampleParseSet() {
	set, _ := capabilities.ParseSet([]string{"time:90s", "fs.read:workspace", "env:TOKEN"})
	fmt.Println(set)
	_, err := capabilities.ParseSet([]string{"net:none", "net:host"})
	fmt.Println(err)
	// Output:
	// fs.read:workspace, env:TOKEN, time:1m30s
	// capability "net:host": conflicts with net:none: there is one network setting; ask for one
}
