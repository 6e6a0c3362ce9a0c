package main

import (
	"fmt"
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

// buildLibrary builds libscatterkit.so (and its header) into dir.
func buildLibrary(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: the c-shared build and the C program need it")
	}
	so := filepath.Join(dir, "libscatterkit.so")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", so, ".")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return so
}

// docBlock returns the ```c block of docs/capi.md.
func docBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(capiDoc)
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```c\n(.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "%s has no ```c block", capiDoc)
	return string(m[1])
}

var (
	comments  = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	space     = regexp.MustCompile(`\s+`)
	star      = regexp.MustCompile(`\s*\*\s*`)
	prototype = regexp.MustCompile(`(?:extern\s+)?int32_t\s+(sk_\w+)\s*\(([^)]*)\)\s*;`)
	errStruct = regexp.MustCompile(`typedef\s+struct\s*\{([^}]*)\}\s*sk_error\s*;`)
	codeEnum  = regexp.MustCompile(`enum\s*\{([^}]*SK_OK[^}]*)\}\s*;`)
)

func normalize(s string) string {
	s = strings.ReplaceAll(s, "const ", "") // Go cannot say const; the ABI is the same
	s = star.ReplaceAllString(s, "* ")
	return strings.TrimSpace(space.ReplaceAllString(s, " "))
}

// declarations returns the normalized prototypes (by name), sk_error and
// the code enum of a C text.
func declarations(t *testing.T, what, c string) (map[string]string, string, string) {
	t.Helper()
	c = comments.ReplaceAllString(c, " ")
	protos := map[string]string{}
	for _, m := range prototype.FindAllStringSubmatch(c, -1) {
		protos[m[1]] = normalize(m[2])
	}
	s := errStruct.FindStringSubmatch(c)
	e := codeEnum.FindStringSubmatch(c)
	require.NotNil(t, s, "%s: no sk_error", what)
	require.NotNil(t, e, "%s: no code enum", what)
	return protos, normalize(s[1]), normalize(e[1])
}

// TestEndToEnd builds the c-shared library, checks that the header Go
// generates declares exactly what docs/capi.md declares, and runs a C
// program compiled against the page's declarations through the real .so.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the c-shared library (a minute when not cached)")
	}
	dir := t.TempDir()
	so := buildLibrary(t, dir)

	gen, err := os.ReadFile(strings.TrimSuffix(so, ".so") + ".h")
	require.NoError(t, err)
	doc := docBlock(t)
	gp, gs, ge := declarations(t, "generated header", string(gen))
	dp, ds, de := declarations(t, capiDoc, doc)
	require.Len(t, dp, 18, "the functions of %s", capiDoc)
	require.Equal(t, dp, gp, "exported prototypes (right) differ from %s's (left)", capiDoc)
	require.Equal(t, ds, gs, "sk_error")
	require.Equal(t, de, ge, "error codes")

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
