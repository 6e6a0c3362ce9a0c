package mesh_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/scatterkit/scatterkit/reshard"
	"github.com/scatterkit/scatterkit/reshard/mesh"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNewRefuses: a bad configuration or rank size fails New with
// nothing left open.
func TestNewRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		cfg      mesh.Config
		src, dst []int64
	}{
		"transport":  {mesh.Config{Transport: "udp"}, []int64{64}, []int64{64}},
		"empty rank": {mesh.Config{Transport: "shm"}, []int64{64}, []int64{0}},
		"negative":   {mesh.Config{Transport: "tcp"}, []int64{-1}, []int64{64}},
	} {
		m, err := mesh.New(c.cfg, c.src, c.dst)
		if err == nil || m != nil {
			t.Errorf("%s: mesh %v, error %v", name, m, err)
		}
	}
}

// TestMeshCloses: a mesh opens its ranks and connections and closes them
// all; its links name the other side's ranks only.
func TestMeshCloses(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		m, err := mesh.New(mesh.Config{Transport: tr, StagingBytes: 1 << 20}, []int64{4096, 8192}, []int64{4096})
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Src(1).Bytes()) != 8192 || len(m.Dst(0).Bytes()) != 4096 {
			t.Fatal("rank sizes")
		}
		ctx := t.Context()
		for _, dir := range []struct {
			d          reshard.Dir
			self, peer int
		}{{reshard.Pull, 0, 1}, {reshard.Push, 1, 0}} {
			links := m.Links(ctx, dir.d)
			self, peer := dir.self, dir.peer
			l, err := links(self, peer)
			if err != nil {
				t.Fatal(err)
			}
			if l.Conn == nil || l.Local == nil || l.Remote.Len == 0 {
				t.Fatalf("%s %v: link %+v", tr, dir.d, l)
			}
			if _, err := links(self, 5); err == nil {
				t.Fatalf("%s %v: a link to rank 5", tr, dir.d)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
