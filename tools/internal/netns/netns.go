package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Prefix starts the name of every namespace this package creates.
const Prefix = "scatterbench-"

// Errors of the package; the typed errors below carry the detail.
var (
	// ErrUnavailable: namespaces cannot be created here (not root, no ip
	// command, not Linux).
	ErrUnavailable = errors.New("netns: network namespaces unavailable")
	// ErrCommand: an ip or tc command failed.
	ErrCommand = errors.New("netns: command failed")
	// ErrRate: a tbf rate that tc would not accept.
	ErrRate = errors.New("netns: invalid rate")
	// ErrNoSubnet: every candidate /30 is in use on this host.
	ErrNoSubnet = errors.New("netns: no free private /30")
)

// UnavailableError says why namespaces cannot be used.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string { return "netns: unavailable: " + e.Reason }

// Unwrap returns ErrUnavailable.
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// CommandError reports a failed command with its output.
type CommandError struct {
	Args   []string
	Output string
	Err    error
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("netns: %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Output))
}

// Unwrap returns ErrCommand and the cause.
func (e *CommandError) Unwrap() []error { return []error{ErrCommand, e.Err} }

// RateError reports a rate ValidateRate rejected.
type RateError struct{ Rate, Reason string }

func (e *RateError) Error() string { return fmt.Sprintf("netns: rate %q: %s", e.Rate, e.Reason) }

// Unwrap returns ErrRate.
func (e *RateError) Unwrap() error { return ErrRate }

// Runner runs a command (argv[0] is "ip" or "tc") and returns its combined
// output.
type Runner func(ctx context.Context, argv ...string) ([]byte, error)

// Exec runs commands with os/exec.
func Exec(ctx context.Context, argv ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return out, &CommandError{Args: argv, Output: string(out), Err: err}
	}
	return out, nil
}

// Available reports whether this process can create namespaces: it must be
// root on Linux with the ip command on PATH (and tc when rate shaping).
func Available(withTC bool) error {
	if os.Geteuid() != 0 {
		return &UnavailableError{Reason: fmt.Sprintf("needs root (euid %d)", os.Geteuid())}
	}
	if err := supported(); err != nil {
		return err
	}
	cmds := []string{"ip"}
	if withTC {
		cmds = append(cmds, "tc")
	}
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			return &UnavailableError{Reason: fmt.Sprintf("no %s command: %v", c, err)}
		}
	}
	return nil
}

var rateRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$`)

// RateBytes parses a tc rate ("1gbit", "500mbit", "100mbps": tc's units,
// where "bps" means bytes per second) into bytes per second.
func RateBytes(rate string) (float64, error) {
	m := rateRE.FindStringSubmatch(strings.ToLower(rate))
	if m == nil {
		return 0, &RateError{Rate: rate, Reason: "want a number and one of bit, kbit, mbit, gbit, tbit (bits/s) or bps, kbps, mbps, gbps, tbps (bytes/s)"}
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v <= 0 {
		return 0, &RateError{Rate: rate, Reason: "must be positive"}
	}
	mult := map[string]float64{"bit": 1.0 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "tbit": 1e12 / 8,
		"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}[m[2]]
	b := v * mult
	if b < 1000 {
		return 0, &RateError{Rate: rate, Reason: "below 1000 bytes/s: a benchmark would never finish"}
	}
	return b, nil
}

// Options configures Create.
type Options struct {
	// Pid names the namespace and interfaces (default os.Getpid()).
	Pid int
	// Rate, when set, shapes both veth ends with tbf at this tc rate.
	Rate string
	// Run runs the commands (default Exec).
	Run Runner
}

// Link is a namespace joined to the root namespace by a veth pair.
type Link struct {
	Namespace      string
	HostIf, PeerIf string
	// HostAddr is the root side's address, PeerAddr the namespace side's,
	// both in one /30.
	HostAddr, PeerAddr netip.Addr
	Rate               string
	run                Runner
	closed             bool
}

// names returns the namespace and interface names for pid.
func names(pid int) (ns, host, peer string) {
	p := strconv.Itoa(pid)
	return Prefix + p, "sb" + p + "h", "sb" + p + "n"
}

// Create makes the namespace, the veth pair and the addresses (and the tbf
// qdiscs). On failure it removes whatever it made.
func Create(ctx context.Context, opts Options) (l *Link, err error) {
	if opts.Pid == 0 {
		opts.Pid = os.Getpid()
	}
	if opts.Run == nil {
		opts.Run = Exec
	}
	var rate float64
	if opts.Rate != "" {
		if rate, err = RateBytes(opts.Rate); err != nil {
			return nil, err
		}
	}
	ns, host, peer := names(opts.Pid)
	l = &Link{Namespace: ns, HostIf: host, PeerIf: peer, Rate: opts.Rate, run: opts.Run}
	addrs, err := opts.Run(ctx, "ip", "-o", "addr", "show")
	if err != nil {
		return nil, err
	}
	if l.HostAddr, l.PeerAddr, err = pickSubnet(opts.Pid, string(addrs)); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
			l = nil
		}
	}()
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", ns},
		{"ip", "addr", "add", l.HostAddr.String() + "/30", "dev", host},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", ns, "addr", "add", l.PeerAddr.String() + "/30", "dev", peer},
		{"ip", "-n", ns, "link", "set", peer, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
	}
	if opts.Rate != "" {
		// A burst of 10 ms at the rate (at least 64 KiB) lets tbf keep the
		// rate with the kernel's timer granularity.
		burst := strconv.Itoa(int(max(rate/100, 64<<10)))
		tbf := []string{"root", "tbf", "rate", opts.Rate, "burst", burst, "latency", "50ms"}
		steps = append(steps,
			append([]string{"tc", "qdisc", "add", "dev", host}, tbf...),
			append([]string{"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", peer}, tbf...))
	}
	for _, s := range steps {
		if _, err = opts.Run(ctx, s...); err != nil {
			return l, err
		}
	}
	return l, nil
}

// pickSubnet picks a /30 in 10.207.0.0/16 from pid that no address in the
// "ip -o addr show" output falls into.
func pickSubnet(pid int, addrs string) (host, peer netip.Addr, err error) {
	var used []netip.Addr
	for _, line := range strings.Split(addrs, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				if p, err := netip.ParsePrefix(f[i+1]); err == nil {
					used = append(used, p.Addr())
				}
			}
		}
	}
	const subnets = 1 << 14 // /30s in a /16
	for k := range 256 {
		idx := (pid + k) % subnets
		base := netip.AddrFrom4([4]byte{10, 207, byte(idx >> 6), byte(idx&63) * 4})
		net := netip.PrefixFrom(base, 30)
		free := true
		for _, a := range used {
			if net.Contains(a) {
				free = false
				break
			}
		}
		if free {
			return base.Next(), base.Next().Next(), nil
		}
	}
	return netip.Addr{}, netip.Addr{}, ErrNoSubnet
}

// Command returns the argv that runs name with args inside the namespace.
func (l *Link) Command(name string, args ...string) []string {
	return append([]string{"ip", "netns", "exec", l.Namespace, name}, args...)
}

// Close deletes the namespace (which takes its veth end, and so the pair,
// with it) and the root side interface if it is still there. Processes
// still running inside keep the namespace alive: stop them first. It is
// idempotent.
func (l *Link) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return remove(ctx, l.run, l.Namespace, l.HostIf)
}

// remove deletes a namespace and an interface, ignoring "not there".
func remove(ctx context.Context, run Runner, ns, host string) error {
	var errs []error
	if out, err := run(ctx, "ip", "netns", "del", ns); err != nil && !notFound(out, err) {
		errs = append(errs, err)
	}
	if out, err := run(ctx, "ip", "link", "del", host); err != nil && !notFound(out, err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func notFound(out []byte, err error) bool {
	s := string(out)
	var ce *CommandError
	if errors.As(err, &ce) {
		s += ce.Output
	}
	return strings.Contains(s, "No such file") || strings.Contains(s, "Cannot find device") ||
		strings.Contains(s, "does not exist")
}

// Sweep deletes the namespaces (and their root side interfaces) that this
// package created for processes that no longer run.
func Sweep(ctx context.Context, run Runner) error {
	if run == nil {
		run = Exec
	}
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], Prefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(f[0], Prefix))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		ns, host, _ := names(pid)
		errs = append(errs, remove(ctx, run, ns, host))
	}
	return errors.Join(errs...)
}
