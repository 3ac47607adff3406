// Command modcheck checks that each public module of this repository can be
// fetched alone, as a user's `go get` fetches it, where the workspace and
// the replace directives that make development easy are not seen. Run from
// the repository's root; every go command it runs has GOWORK=off.
//
//  1. Every module requires the repository's modules at one released
//     version (not v0.0.0): the modules move together.
//  2. No package of a published module imports an internal package of
//     another module (the programs run from a clone, examples/ and bench/,
//     may share their own).
//  3. The committed files (git archive HEAD) are served at that version by a
//     file module proxy (GOPROXY=file://...), as tags of that version would
//     serve them, and a throwaway consumer module of each public module gets
//     it through that proxy alone and builds every public package.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// repoPrefix is the path every module of the repository starts with.
const repoPrefix = "github.com/aggflow/aggflow"

// notPublished lists the module directories that are programs or suites
// run from a clone, not libraries a user requires.
var notPublished = []string{"bench", "examples/flights", "examples/flights/kafka", "examples/flights/jetstream"}

// mod is one module of the repository.
type mod struct {
	dir, path string // dir relative to the root, with slashes
	requires  []module.Version
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "modcheck:", err)
		os.Exit(1)
	}
}

func run() error {
	work, err := os.MkdirTemp("", "modcheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	src, proxy := filepath.Join(work, "src"), filepath.Join(work, "proxy")
	if err := exportHead(src); err != nil {
		return err
	}
	mods, err := modules(src)
	if err != nil {
		return err
	}
	version, err := oneVersion(mods)
	if err != nil {
		return err
	}
	fmt.Printf("the repository's modules are required at %s\n", version)
	for _, m := range mods {
		if slices.Contains(notPublished, m.dir) {
			continue
		}
		if err := noForeignInternal(src, m, mods); err != nil {
			return err
		}
	}
	fmt.Println("no published module imports another module's internal packages")

	for _, m := range mods {
		if err := serve(filepath.Join(src, filepath.FromSlash(m.dir)), m.path, version, proxy); err != nil {
			return fmt.Errorf("serving %s: %w", m.path, err)
		}
	}
	upstream, err := goOut(".", nil, "env", "GOPROXY")
	if err != nil {
		return err
	}
	upstream = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(upstream), ",direct"), "|direct")
	cache, err := goOut(".", nil, "env", "GOMODCACHE")
	if err != nil {
		return err
	}
	// A module cache of its own, so that no version of the repository's
	// modules fetched before is seen; the other modules come from the
	// machine's module cache, read as a proxy, before the network.
	env := []string{"GOMODCACHE=" + filepath.Join(work, "modcache"),
		"GOPROXY=" + strings.Join([]string{fileURL(proxy), fileURL(filepath.Join(strings.TrimSpace(cache), "cache", "download")), upstream}, ","),
		"GONOSUMDB=" + repoPrefix, "GOFLAGS=-mod=mod -trimpath"}
	defer goOut(".", env, "clean", "-modcache") // its files are read-only
	for _, m := range mods {
		if slices.Contains(notPublished, m.dir) {
			continue
		}
		n, err := consume(src, m, version, filepath.Join(work, "consumer-"+strings.ReplaceAll(m.dir, "/", "-")), env)
		if err != nil {
			return err
		}
		fmt.Printf("ok  go get %s@%s alone: %d packages built\n", m.path, version, n)
	}
	return nil
}

// modules reads every go.mod of the tree src outside .ci/.
func modules(src string) ([]mod, error) {
	out, err := exec.Command("git", "ls-files", "--", "go.mod", "*/go.mod").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var mods []mod
	for _, gomod := range strings.Fields(string(out)) {
		if strings.HasPrefix(gomod, ".ci/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(gomod)))
		if err != nil {
			return nil, err
		}
		f, err := modfile.ParseLax(gomod, data, nil)
		if err != nil {
			return nil, err
		}
		m := mod{dir: path.Dir(gomod), path: f.Module.Mod.Path}
		for _, r := range f.Require {
			if inRepo(r.Mod.Path) {
				m.requires = append(m.requires, r.Mod)
			}
		}
		mods = append(mods, m)
	}
	return mods, nil
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

func inRepo(p string) bool { return p == repoPrefix || strings.HasPrefix(p, repoPrefix+"/") }

// oneVersion returns the one version every module requires the
// repository's modules at.
func oneVersion(mods []mod) (string, error) {
	seen := map[string][]string{}
	for _, m := range mods {
		for _, r := range m.requires {
			seen[r.Version] = append(seen[r.Version], m.dir+" requires "+r.Path)
		}
	}
	if len(seen) != 1 {
		return "", fmt.Errorf("the modules require the repository's modules at %d versions, want one: %v", len(seen), seen)
	}
	for v, who := range seen {
		if v == "v0.0.0" {
			return "", fmt.Errorf("v0.0.0 is no released version (%s)", strings.Join(who, "; "))
		}
		return v, nil
	}
	return "", errors.New("no module requires another")
}

// owner returns the module of mods an import path belongs to: the longest
// module path that is a prefix of it.
func owner(importPath string, mods []mod) string {
	best := ""
	for _, m := range mods {
		if (importPath == m.path || strings.HasPrefix(importPath, m.path+"/")) && len(m.path) > len(best) {
			best = m.path
		}
	}
	return best
}

// noForeignInternal fails when a package of m, tests included, imports an
// internal package of another module.
func noForeignInternal(src string, m mod, mods []mod) error {
	out, err := goOut(filepath.Join(src, m.dir), nil, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if !inRepo(imp) || !slices.Contains(strings.Split(imp, "/"), "internal") {
				continue
			}
			if o := owner(imp, mods); o != m.path {
				return fmt.Errorf("%s (module %s) imports %s, internal to module %s", p.ImportPath, m.path, imp, o)
			}
		}
	}
}

// exportHead writes the files committed at HEAD into dir.
func exportHead(dir string) error {
	var archive bytes.Buffer
	cmd := exec.Command("git", "archive", "--format=tar", "HEAD")
	cmd.Stdout, cmd.Stderr = &archive, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	r := tar.NewReader(&archive)
	for {
		h, err := r.Next()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				var f *os.File
				if f, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777); err == nil {
					_, err = io.Copy(f, r)
					err = errors.Join(err, f.Close())
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// serve writes the proxy's list, .info, .mod and .zip of the module path in
// dir at version.
func serve(dir, path, version, proxy string) error {
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	return errors.Join(zip.CreateFromDir(z, module.Version{Path: path, Version: version}, dir), z.Close())
}

// consume makes a module in dir that imports every public package of m (in
// the tree src),
// gets m at version with env and builds; it returns the packages' count.
func consume(src string, m mod, version, dir string, env []string) (int, error) {
	out, err := goOut(filepath.Join(src, m.dir), nil, "list", "-f", "{{.Name}} {{.ImportPath}}", "./...")
	if err != nil {
		return 0, err
	}
	var imports []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, p, _ := strings.Cut(line, " ")
		if name != "main" && !slices.Contains(strings.Split(p, "/"), "internal") {
			imports = append(imports, fmt.Sprintf("\t_ %q\n", p))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	main := "package main\n\nimport (\n" + strings.Join(imports, "") + ")\n\nfunc main() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/consumer\n\ngo 1.26.0\n"), 0o644); err != nil {
		return 0, err
	}
	for _, args := range [][]string{{"get", m.path + "@" + version}, {"build", "./..."}} {
		if out, err := goOut(dir, env, args...); err != nil {
			return 0, fmt.Errorf("a module of its own that imports %s: go %s: %w\n%s", m.path, strings.Join(args, " "), err, out)
		}
	}
	return len(imports), nil
}

// goOut runs the go command in dir with GOWORK=off and env, and returns its
// combined output.
func goOut(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	if env != nil {
		cmd.Stderr = &out
	} else {
		cmd.Stderr = os.Stderr
	}
	err := cmd.Run()
	return out.String(), err
}
