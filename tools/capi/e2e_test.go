package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// capiDoc is the page that declares the ABI.
const capiDoc = "../../docs/capi.md"

// buildLibrary builds the library named so (and its header) into dir,
// with the given build tags.
func buildLibrary(t *testing.T, dir, so string, tags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: the c-shared build and the C program need it")
	}
	so = filepath.Join(dir, so)
	args := []string{"build", "-buildmode=c-shared", "-o", so}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, ".")...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return so
}

// docBlock returns the ```c blocks of docs/capi.md, in order, as one text.
// The page is the repository's: a copy of the tools module alone (a user's
// `go get`, scripts/check-modules.sh) has none, and these tests skip there;
// in the repository (go.work two levels up) a missing page fails.
func docBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(capiDoc)
	if errors.Is(err, fs.ErrNotExist) {
		if _, werr := os.Stat("../../go.work"); errors.Is(werr, fs.ErrNotExist) {
			t.Skipf("%s is not here (the tools module outside its repository): the header checks run in the repository", capiDoc)
		}
	}
	require.NoError(t, err)
	ms := regexp.MustCompile("(?s)```c\n(.*?)```").FindAllSubmatch(b, -1)
	require.NotEmpty(t, ms, "%s has no ```c block", capiDoc)
	var sb strings.Builder
	for _, m := range ms {
		sb.Write(m[1])
	}
	return sb.String()
}

var (
	comments  = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	space     = regexp.MustCompile(`\s+`)
	star      = regexp.MustCompile(`\s*\*\s*`)
	prototype = regexp.MustCompile(`(?:extern\s+)?int32_t\s+(sk_\w+)\s*\(([^)]*)\)\s*;`)
	errStruct = regexp.MustCompile(`typedef\s+struct\s*\{([^}]*)\}\s*sk_error\s*;`)
	codeEnum  = regexp.MustCompile(`enum\s*\{([^}]*SK_OK[^}]*)\}\s*;`)
	flagEnum  = regexp.MustCompile(`enum\s*\{([^}]*SK_CUDA_HOST[^}]*)\}\s*;`)
)

func normalize(s string) string {
	s = strings.ReplaceAll(s, "const ", "") // Go cannot say const; the ABI is the same
	s = star.ReplaceAllString(s, "* ")
	return strings.TrimSpace(space.ReplaceAllString(s, " "))
}

// decls are the declarations of a C text, normalized: the prototypes by
// name, sk_error's fields, the code enum and the CUDA flag enum.
type decls struct {
	protos       map[string]string
	errStruct    string
	codes, flags string
}

// declarations returns the declarations of a C text.
func declarations(t *testing.T, what, c string) decls {
	t.Helper()
	c = comments.ReplaceAllString(c, " ")
	d := decls{protos: map[string]string{}}
	for _, m := range prototype.FindAllStringSubmatch(c, -1) {
		d.protos[m[1]] = normalize(m[2])
	}
	s := errStruct.FindStringSubmatch(c)
	e := codeEnum.FindStringSubmatch(c)
	f := flagEnum.FindStringSubmatch(c)
	require.NotNil(t, s, "%s: no sk_error", what)
	require.NotNil(t, e, "%s: no code enum", what)
	require.NotNil(t, f, "%s: no SK_CUDA_ flag enum", what)
	d.errStruct, d.codes, d.flags = normalize(s[1]), normalize(e[1]), normalize(f[1])
	return d
}

// requireHeader checks that the header cgo generated next to so declares
// exactly what docs/capi.md declares, and returns the page's C text.
func requireHeader(t *testing.T, so string) string {
	t.Helper()
	gen, err := os.ReadFile(strings.TrimSuffix(so, ".so") + ".h")
	require.NoError(t, err)
	doc := docBlock(t)
	g := declarations(t, "generated header", string(gen))
	d := declarations(t, capiDoc, doc)
	require.Len(t, d.protos, 29, "the functions of %s", capiDoc)
	require.Equal(t, d.protos, g.protos, "exported prototypes (right) differ from %s's (left)", capiDoc)
	require.Equal(t, d.errStruct, g.errStruct, "sk_error")
	require.Equal(t, d.codes, g.codes, "error codes")
	require.Equal(t, d.flags, g.flags, "SK_CUDA_ flags")
	return doc
}

// TestEndToEnd builds the c-shared library, checks that the header Go
// generates declares exactly what docs/capi.md declares, and runs a C
// program compiled against the page's declarations through the real .so.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the c-shared library (a minute when not cached)")
	}
	dir := t.TempDir()
	so := buildLibrary(t, dir, "libscatterkit.so")
	doc := requireHeader(t, so)

	header := "#ifndef SK_CAPI_H\n#define SK_CAPI_H\n#include <stdint.h>\n" + doc + "#endif\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "capi.h"), []byte(header), 0o644))
	prog := filepath.Join(dir, "e2e")
	cc := exec.Command("gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-o", prog, "testdata/e2e.c",
		"-I", dir, "-L", dir, "-lscatterkit", "-Wl,-rpath,"+dir)
	out, err := cc.CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)

	r := newRand(t)
	data := filepath.Join(dir, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	run := exec.Command(prog, data, fmt.Sprint(r.Uint64()))
	out, err = run.CombinedOutput()
	require.NoError(t, err, "e2e: %s", out)
	require.Equal(t, "ok\n", string(out))
}

// TestHeaderCUDA builds libscatterkit_cuda.so (the `cuda` tag) and checks
// its header against docs/capi.md too: the same symbol set as the CPU
// library. It needs CUDA's cuda.h and a libcuda to link (scripts/
// gpu-build.sh runs it with the stub from scripts/cuda-headers.sh); where
// cuda.h is not found it skips, and REQUIRE_CUDA_BUILD=1 makes that a
// failure.
func TestHeaderCUDA(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the c-shared library with the cuda tag")
	}
	if !cudaHeaders() {
		if os.Getenv("REQUIRE_CUDA_BUILD") == "1" {
			t.Fatal("REQUIRE_CUDA_BUILD=1 but no cuda.h on CGO_CFLAGS' -I paths or the system's")
		}
		t.Skip("no cuda.h (CGO_CFLAGS -I, /usr/include, /usr/local/cuda/include): scripts/gpu-build.sh provides it")
	}
	so := buildLibrary(t, t.TempDir(), "libscatterkit_cuda.so", "cuda")
	requireHeader(t, so)
}

// cudaHeaders reports whether cgo would find cuda.h.
func cudaHeaders() bool {
	dirs := []string{"/usr/include", "/usr/local/cuda/include"}
	for _, f := range strings.Fields(os.Getenv("CGO_CFLAGS")) {
		if d, ok := strings.CutPrefix(f, "-I"); ok && d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "cuda.h")); err == nil {
			return true
		}
	}
	return false
}

// TestArgStructs: the argument structs the library reads (exports.go's
// preamble) are the page's, field for field, so a binding written from
// the page reads and writes the same offsets.
func TestArgStructs(t *testing.T) {
	doc := docBlock(t)
	src, err := os.ReadFile("exports.go")
	require.NoError(t, err)
	ws := regexp.MustCompile(`\s+`)
	for _, name := range []string{"sk_lookup_args", "sk_cuda_lookup_args"} {
		re := regexp.MustCompile(`(?s)typedef struct \{([^}]*)\} ` + name + `;`)
		d, g := re.FindStringSubmatch(doc), re.FindStringSubmatch(string(src))
		require.NotNil(t, d, "%s in %s", name, capiDoc)
		require.NotNil(t, g, "%s in exports.go", name)
		require.Equal(t, ws.ReplaceAllString(d[1], " "), ws.ReplaceAllString(g[1], " "), name)
	}
}
