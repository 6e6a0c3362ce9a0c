package netns

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fake records commands and fails the one whose text starts with failOn.
type fake struct {
	cmds   []string
	failOn string
	out    map[string]string
}

func (f *fake) run(_ context.Context, argv ...string) ([]byte, error) {
	c := strings.Join(argv, " ")
	f.cmds = append(f.cmds, c)
	if f.failOn != "" && strings.HasPrefix(c, f.failOn) {
		return []byte("RTNETLINK answers: File exists"), &CommandError{Args: argv, Output: "RTNETLINK answers: File exists", Err: errors.New("exit status 2")}
	}
	return []byte(f.out[c]), nil
}

func TestCreateCommands(t *testing.T) {
	f := &fake{out: map[string]string{"ip -o addr show": "1: lo    inet 127.0.0.1/8 scope host lo\n2: eth0    inet 10.207.0.166/24 brd 10.207.0.255 scope global eth0\n"}}
	l, err := Create(context.Background(), Options{Pid: 41, Rate: "1gbit", Run: f.run})
	require.NoError(t, err)
	// pid 41 would be 10.207.0.164/30, which holds 10.207.0.166: the next one.
	require.Equal(t, netip.MustParseAddr("10.207.0.169"), l.HostAddr)
	require.Equal(t, netip.MustParseAddr("10.207.0.170"), l.PeerAddr)
	require.Equal(t, []string{
		"ip -o addr show",
		"ip netns add scatterbench-41",
		"ip link add sb41h type veth peer name sb41n",
		"ip link set sb41n netns scatterbench-41",
		"ip addr add 10.207.0.169/30 dev sb41h",
		"ip link set sb41h up",
		"ip -n scatterbench-41 addr add 10.207.0.170/30 dev sb41n",
		"ip -n scatterbench-41 link set sb41n up",
		"ip -n scatterbench-41 link set lo up",
		"tc qdisc add dev sb41h root tbf rate 1gbit burst 1250000 latency 50ms",
		"ip netns exec scatterbench-41 tc qdisc add dev sb41n root tbf rate 1gbit burst 1250000 latency 50ms",
	}, f.cmds)
	require.Equal(t, []string{"ip", "netns", "exec", "scatterbench-41", "/bin/owner", "-x"}, l.Command("/bin/owner", "-x"))
	f.cmds = nil
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "idempotent")
	require.Equal(t, []string{"ip netns del scatterbench-41", "ip link del sb41h"}, f.cmds)
}

func TestCreateCleansUpOnFailure(t *testing.T) {
	f := &fake{failOn: "ip link add"}
	l, err := Create(context.Background(), Options{Pid: 7, Run: f.run})
	require.Nil(t, l)
	require.ErrorIs(t, err, ErrCommand)
	require.Contains(t, err.Error(), "File exists")
	require.Equal(t, []string{"ip -o addr show", "ip netns add scatterbench-7", "ip link add sb7h type veth peer name sb7n",
		"ip netns del scatterbench-7", "ip link del sb7h"}, f.cmds)
}

func TestRateBytes(t *testing.T) {
	for _, tc := range []struct {
		rate string
		want float64
		err  bool
	}{
		{"1gbit", 1.25e8, false}, {"500mbit", 62.5e6, false}, {"100mbps", 1e8, false}, {"2.5Gbit", 3.125e8, false},
		{"1kbit", 0, true}, {"fast", 0, true}, {"10", 0, true}, {"-1gbit", 0, true}, {"0gbit", 0, true}, {"", 0, true},
	} {
		t.Run(tc.rate, func(t *testing.T) {
			got, err := RateBytes(tc.rate)
			if tc.err {
				require.ErrorIs(t, err, ErrRate)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, tc.want, got, 1e-6)
		})
	}
	_, err := Create(context.Background(), Options{Pid: 1, Rate: "warp9", Run: (&fake{}).run})
	require.ErrorIs(t, err, ErrRate)
}

func TestNoSubnet(t *testing.T) {
	var b strings.Builder
	for i := range 1 << 14 {
		b.WriteString("x inet " + netip.AddrFrom4([4]byte{10, 207, byte(i >> 6), byte(i&63)*4 + 1}).String() + "/30 y\n")
	}
	_, _, err := pickSubnet(5, b.String())
	require.ErrorIs(t, err, ErrNoSubnet)
}

func TestSweep(t *testing.T) {
	// A pid that cannot exist (above the kernel's pid_max limit of 2^22).
	f := &fake{out: map[string]string{"ip netns list": "other\nscatterbench-99999999 (id: 3)\nscatterbench-" + itoa(os.Getpid()) + "\nscatterbench-x\n"}}
	require.NoError(t, Sweep(context.Background(), f.run))
	require.Equal(t, []string{"ip netns list", "ip netns del scatterbench-99999999", "ip link del sb99999999h"}, f.cmds,
		"only the namespace of a dead process goes")
}

func itoa(v int) string { return strconv.Itoa(v) }

// TestRealNamespace creates and deletes a real namespace when this process
// may (root, ip on PATH).
func TestRealNamespace(t *testing.T) {
	if err := Available(false); err != nil {
		t.Skipf("skipping: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := Create(ctx, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), l.Namespace)
	argv := l.Command("ip", "-o", "addr", "show", "dev", l.PeerIf)
	out, err = exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), l.PeerAddr.String()+"/30")
	require.NoError(t, l.Close())
	out, err = exec.CommandContext(ctx, "ip", "netns", "list").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), l.Namespace)
}
