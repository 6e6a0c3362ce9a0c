//go:build ucx

package engine_test

import (
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/ucx"
)

// With the ucx tag every test that runs over the backends runs over UCX
// too (its one-sided operations over the UCX transports UCX_TLS names;
// scripts/test.sh sets tcp).
func init() {
	backends = append(backends, backend{name: "ucx", new: func() verbs.Transport {
		t, err := ucx.New(ucx.Config{})
		if err != nil {
			panic(err)
		}
		return t
	}, addr: func() string { return "127.0.0.1:0" }, exposeRegistered: true})
}
