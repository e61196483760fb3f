// FAKE DELEGATE, for tests only: a CNI plugin linked statically (CGO_ENABLED=0), so that it runs
// in a node root that has no C library at all, where no installable plugin runs (Debian's
// reference plugins are dynamic executables). It stands for the delegate the guard wraps on such
// a node (Talos, a musl host), so the tests can show ADD and DEL going through the guard there.
//
// Behaviour, from its own plugin config:
//
//	stateDir    ADD writes <stateDir>/<containerID>:<ifname>, DEL removes it (DEL of an absent
//	            one succeeds, as the spec asks)
//	recordFile  one JSON line per call: {"command", "containerID", "ifname", "prevResult"}
//
// ADD prints a result naming the interface and 10.99.0.2/24; VERSION prints the versions below.
// Built by tests/support/staticfake.py with Go's standard library only.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

type config struct {
	CNIVersion string          `json:"cniVersion"`
	StateDir   string          `json:"stateDir"`
	RecordFile string          `json:"recordFile"`
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
}

func fail(code int, msg string) {
	fmt.Printf("{\"cniVersion\":\"1.0.0\",\"code\":%d,\"msg\":%q}\n", code, msg)
	os.Exit(1)
}

func record(conf config, command string) {
	if conf.RecordFile == "" {
		return
	}
	line, _ := json.Marshal(map[string]interface{}{
		"command":     command,
		"containerID": os.Getenv("CNI_CONTAINERID"),
		"ifname":      os.Getenv("CNI_IFNAME"),
		"prevResult":  len(conf.PrevResult) > 0,
	})
	f, err := os.OpenFile(conf.RecordFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fail(5, err.Error())
	}
	defer f.Close()
	f.Write(append(line, '\n'))
}

func main() {
	command := os.Getenv("CNI_COMMAND")
	if command == "VERSION" {
		fmt.Println(`{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]}`)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		fail(6, err.Error())
	}
	var conf config
	if err := json.Unmarshal(raw, &conf); err != nil {
		fail(6, err.Error())
	}
	record(conf, command)
	state := filepath.Join(conf.StateDir, os.Getenv("CNI_CONTAINERID")+":"+os.Getenv("CNI_IFNAME"))
	switch command {
	case "ADD":
		if err := os.WriteFile(state, []byte("added\n"), 0o600); err != nil {
			fail(5, err.Error())
		}
		fmt.Printf(`{"cniVersion":%q,"interfaces":[{"name":%q}],"ips":[{"address":"10.99.0.2/24","interface":0}]}`+"\n",
			conf.CNIVersion, os.Getenv("CNI_IFNAME"))
	case "DEL":
		if err := os.Remove(state); err != nil && !os.IsNotExist(err) {
			fail(5, err.Error())
		}
	case "CHECK", "GC", "STATUS":
	default:
		fail(4, "unknown CNI_COMMAND "+command)
	}
}
