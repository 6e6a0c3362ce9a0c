package probe_test

import "runtime"

func runtimeGOROOT() string { return runtime.GOROOT() }
