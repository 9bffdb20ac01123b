// Package docscheck keeps the Markdown documentation true to the repository: every relative link
// and #anchor resolves, every `make` target the docs name exists in the Makefile, every
// `oncekey` command and flag they name exists in the CLI, and every Go code block is an excerpt
// of a compiled Go file. Its tests (and cmd/oncekey's, for the CLI) run it over the repository in
// `make test`; docs/testing.md#the-docs-check says how to mark a code block.
//
// It is test infrastructure: nothing in the library may import it.
package docscheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
)

// Problem is one thing wrong in a Markdown file: File is relative to the repository root, Line
// counts from 1.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// Doc is one parsed Markdown file.
type Doc struct {
	Path  string // relative to the repository root, slash-separated
	Lines []string
	// inCode[i] reports whether line i (0-based) is inside a fenced code block, fences included.
	inCode []bool
	blocks []block
}

// block is a fenced code block: the 0-based line of its opening fence, the fence's info string
// ("go", "sh", ...) and the lines between the fences.
type block struct {
	open int
	info string
	body []string
}

// Repo is the set of Markdown files of a repository and the root they were read from.
type Repo struct {
	Root string
	Docs []*Doc
}

// skipDir reports whether a directory is left out of the walk: hidden directories, testdata
// (fixtures, this package's own included) and vendor.
func skipDir(name string) bool {
	return name != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules")
}

// Load reads every *.md file under root, skipping the directories skipDir names.
func Load(root string) (*Repo, error) {
	r := &Repo{Root: root}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		doc, err := readDoc(root, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		r.Docs = append(r.Docs, doc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("docscheck: %w", err)
	}
	return r, nil
}

func readDoc(root, rel string) (*Doc, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	d := &Doc{Path: rel, Lines: strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")}
	d.inCode = make([]bool, len(d.Lines))
	fence := ""
	var cur *block
	for i, l := range d.Lines {
		t := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			fence = t[:3]
			d.inCode[i] = true
			cur = &block{open: i, info: strings.TrimSpace(strings.TrimLeft(t, fence[:1]))}
		case fence != "":
			d.inCode[i] = true
			if strings.HasPrefix(t, fence) && strings.TrimSpace(strings.TrimLeft(t, fence[:1])) == "" {
				fence = ""
				d.blocks = append(d.blocks, *cur)
				continue
			}
			cur.body = append(cur.body, l)
		}
	}
	if fence != "" { // an unclosed block runs to the end of the file
		d.blocks = append(d.blocks, *cur)
	}
	return d, nil
}

// Check runs every check that needs only the repository: links and anchors, make targets and Go
// code blocks. The CLI's commands and flags are checked by CheckCLI, given the command tree.
func (r *Repo) Check() []Problem {
	var out []Problem
	out = append(out, r.CheckLinks()...)
	out = append(out, r.CheckMakeTargets()...)
	out = append(out, r.CheckGoBlocks()...)
	out = append(out, r.CheckGoDocLinks()...)
	out = append(out, r.CheckDocsPages()...)
	out = append(out, r.CheckGoRun()...)
	return out
}

var goRunRE = regexp.MustCompile(`(?:^|[\s;&|(])go\s+(?:run|install|build|test|vet)\s+(?:-\S+\s+)*(\./[^\s;&|)]*)`)

// CheckGoRun reports `go run ./dir` (and go install, build, test and vet) in the docs' code
// whose directory is not a package of the root module: missing, or inside a nested module (which
// `go run` from the root cannot build).
func (r *Repo) CheckGoRun() []Problem {
	var out []Problem
	for _, d := range r.Docs {
		for _, s := range d.codeSpans() {
			for _, m := range goRunRE.FindAllStringSubmatch(s.text, -1) {
				dir := path.Clean(strings.TrimSuffix(m[1], "/..."))
				if msg := r.rootPackageDir(dir); msg != "" {
					out = append(out, Problem{d.Path, s.line, fmt.Sprintf("`%s`: %s", strings.TrimSpace(m[0]), msg)})
				}
			}
		}
	}
	return out
}

func (r *Repo) rootPackageDir(dir string) string {
	if dir == ".." || strings.HasPrefix(dir, "../") {
		return dir + " is outside the repository"
	}
	abs := filepath.Join(r.Root, filepath.FromSlash(dir))
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return dir + " is not a directory of the repository"
	}
	for p := dir; p != "."; p = path.Dir(p) {
		if _, err := os.Stat(filepath.Join(r.Root, filepath.FromSlash(p), "go.mod")); err == nil {
			return fmt.Sprintf("%s is in the nested module %s: run it from there (go -C %s run .) or with make", dir, p, p)
		}
	}
	return ""
}

// CheckDocsPages reports a page of docs/ whose first line does not say what it helps you do (a
// sentence starting "This page"), and a page the index, docs/README.md, does not link to.
func (r *Repo) CheckDocsPages() []Problem {
	var index *Doc
	for _, d := range r.Docs {
		if d.Path == "docs/README.md" {
			index = d
		}
	}
	linked := map[string]bool{}
	if index != nil {
		for i := range index.Lines {
			for _, m := range linkRE.FindAllStringSubmatch(index.outsideCode(i), -1) {
				file, _, _ := strings.Cut(m[1], "#")
				linked[path.Clean(path.Join("docs", file))] = true
			}
		}
	}
	var out []Problem
	for _, d := range r.Docs {
		if path.Dir(d.Path) != "docs" || !strings.HasSuffix(d.Path, ".md") {
			continue
		}
		if !strings.HasPrefix(d.Lines[0], "This page ") {
			out = append(out, Problem{d.Path, 1, "the first line must say what the page helps you do, as a sentence starting \"This page \" (see docs/README.md)"})
		}
		if index != nil && d != index && !linked[d.Path] {
			out = append(out, Problem{d.Path, 1, "docs/README.md, the index, does not link to this page: add a row for it"})
		}
	}
	return out
}

// RepoURL is where the repository's files are published; Go doc comments link to the guides
// with it, and CheckGoDocLinks checks those links against the files here.
const RepoURL = "https://github.com/oncekey/oncekey/blob/main/"

var repoLinkRE = regexp.MustCompile(regexp.QuoteMeta(RepoURL) + `([^\s)"'\x60>]+)`)

// CheckGoDocLinks reports links to RepoURL in the comments of the repository's Go files (doc
// comments point to the guides that way) whose file or #anchor does not exist here.
func (r *Repo) CheckGoDocLinks() []Problem {
	byPath := map[string]*Doc{}
	for _, d := range r.Docs {
		byPath[d.Path] = d
	}
	root := &Doc{Path: "README.md"} // resolves repository-relative targets
	var out []Problem
	err := filepath.WalkDir(r.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != r.Root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.Root, p)
		for i, l := range strings.Split(string(b), "\n") {
			for _, m := range repoLinkRE.FindAllStringSubmatch(l, -1) {
				target := strings.TrimRight(m[1], ".,;:")
				if msg := r.checkLink(root, target, byPath); msg != "" {
					out = append(out, Problem{filepath.ToSlash(rel), i + 1, msg})
				}
			}
		}
		return nil
	})
	if err != nil {
		out = append(out, Problem{".", 0, err.Error()})
	}
	return out
}

// ---- links and anchors ----

var (
	linkRE       = regexp.MustCompile(`!?\[[^\]]*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refDefRE     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	inlineCodeRE = regexp.MustCompile("`+[^`]*`+")
	headingRE    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchorRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// Anchors returns the #fragments the file's headings (and <a name> tags) give, as GitHub makes
// them: lower case, punctuation dropped, spaces to hyphens, "-1", "-2" for repeats.
func (d *Doc) Anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for i, l := range d.Lines {
		if d.inCode[i] {
			continue
		}
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// Slug is GitHub's anchor for a heading's text.
func Slug(heading string) string {
	// Links inside a heading count by their text.
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// outsideCode returns line i with its inline code spans blanked, or "" inside a code block.
func (d *Doc) outsideCode(i int) string {
	if d.inCode[i] {
		return ""
	}
	return inlineCodeRE.ReplaceAllStringFunc(d.Lines[i], func(s string) string { return strings.Repeat(" ", len(s)) })
}

// CheckLinks reports relative links whose file does not exist and #anchors that no heading of
// the target Markdown file gives. Links with a scheme (https:, mailto:) are not followed.
func (r *Repo) CheckLinks() []Problem {
	byPath := map[string]*Doc{}
	for _, d := range r.Docs {
		byPath[d.Path] = d
	}
	var out []Problem
	for _, d := range r.Docs {
		for i := range d.Lines {
			l := d.outsideCode(i)
			var targets []string
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				targets = append(targets, m[1])
			}
			if m := refDefRE.FindStringSubmatch(l); m != nil {
				targets = append(targets, m[1])
			}
			for _, t := range targets {
				if msg := r.checkLink(d, t, byPath); msg != "" {
					out = append(out, Problem{d.Path, i + 1, msg})
				}
			}
		}
	}
	return out
}

var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func (r *Repo) checkLink(d *Doc, target string, byPath map[string]*Doc) string {
	target = strings.Trim(target, "<>")
	if schemeRE.MatchString(target) {
		return ""
	}
	file, frag, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(file, '?'); i >= 0 {
		file = file[:i]
	}
	rel := d.Path
	if file != "" {
		if strings.HasPrefix(file, "/") {
			rel = path.Clean(strings.TrimPrefix(file, "/"))
		} else {
			rel = path.Clean(path.Join(path.Dir(d.Path), file))
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Sprintf("link %q leaves the repository", target)
		}
		if _, err := os.Stat(filepath.Join(r.Root, filepath.FromSlash(rel))); err != nil {
			return fmt.Sprintf("link %q: %s does not exist", target, rel)
		}
	}
	if frag == "" || !strings.HasSuffix(rel, ".md") {
		return ""
	}
	td := byPath[rel]
	if td == nil {
		var err error
		if td, err = readDoc(r.Root, rel); err != nil {
			return fmt.Sprintf("link %q: %v", target, err)
		}
	}
	if !td.Anchors()[strings.ToLower(frag)] {
		return fmt.Sprintf("link %q: %s has no heading for #%s", target, rel, frag)
	}
	return ""
}

// ---- code spans: make targets and CLI commands ----

// span is a piece of code the docs show: an inline code span or a line of a code block (with
// its continuation lines joined).
type span struct {
	line int // 1-based
	text string
	// cell is set for the first cell of a Markdown table row.
	cell bool
}

// codeSpans returns the inline code spans and the code-block lines of d. Lines ending in a
// backslash are joined with the next, as a shell would.
func (d *Doc) codeSpans() []span {
	var out []span
	for i := 0; i < len(d.Lines); i++ {
		l := d.Lines[i]
		if d.inCode[i] {
			start := i
			for strings.HasSuffix(l, `\`) && i+1 < len(d.Lines) && d.inCode[i+1] {
				i++
				l = strings.TrimSuffix(l, `\`) + " " + d.Lines[i]
			}
			out = append(out, span{line: start + 1, text: l})
			continue
		}
		cellEnd := -1
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "|") {
			// The first cell ends at the first unescaped | after the opening one.
			off := strings.Index(l, "|") + 1
			for j := off; j < len(l); j++ {
				if l[j] == '|' && l[j-1] != '\\' {
					cellEnd = j
					break
				}
			}
		}
		for _, loc := range inlineCodeRE.FindAllStringIndex(l, -1) {
			s := strings.Trim(l[loc[0]:loc[1]], "`")
			out = append(out, span{line: i + 1, text: s, cell: cellEnd >= 0 && loc[1] <= cellEnd})
		}
	}
	return out
}

var quotedRE = regexp.MustCompile(`"[^"]*"|'[^']*'`)

var makeRE = regexp.MustCompile(`(?:^|[\s;&|(])make((?:\s+[^\s;&|)#]+)*)`)

// makeTargets returns the targets a code span runs with make: `make demo ARGS=-manual` gives
// demo; variables and flags are skipped.
func makeTargets(s string) []string {
	var out []string
	s = quotedRE.ReplaceAllString(s, "Q=")
	for _, m := range makeRE.FindAllStringSubmatch(s, -1) {
		for _, w := range strings.Fields(m[1]) {
			if strings.HasPrefix(w, "-") || strings.Contains(w, "=") || strings.ContainsAny(w, `"'`) {
				continue
			}
			if !regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`).MatchString(w) {
				break
			}
			out = append(out, w)
		}
	}
	return out
}

var ruleRE = regexp.MustCompile(`^([A-Za-z0-9_.%/ -]+?)\s*::?(?:[^=]|$)`)

// MakefileTargets reads the rule targets of the Makefile at root.
func MakefileTargets(root string) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, fmt.Errorf("docscheck: %w", err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "#") {
			continue
		}
		if m := ruleRE.FindStringSubmatch(l); m != nil {
			for _, t := range strings.Fields(m[1]) {
				if !strings.HasPrefix(t, ".") && !strings.Contains(t, "$") {
					out[t] = true
				}
			}
		}
	}
	return out, sc.Err()
}

// CheckMakeTargets reports `make X` in the docs' code where the Makefile has no target X.
func (r *Repo) CheckMakeTargets() []Problem {
	targets, err := MakefileTargets(r.Root)
	if err != nil {
		return []Problem{{"Makefile", 0, err.Error()}}
	}
	var out []Problem
	for _, d := range r.Docs {
		for _, s := range d.codeSpans() {
			for _, t := range makeTargets(s.text) {
				if !targets[t] {
					out = append(out, Problem{d.Path, s.line, fmt.Sprintf("`make %s`: the Makefile has no target %q", t, t)})
				}
			}
		}
	}
	return out
}

// CLIUse is one invocation of the CLI the docs show: the subcommand path and the long flags.
type CLIUse struct {
	File  string
	Line  int
	Args  []string // the words after the program name, flags excluded, up to the end of the command
	Flags []string // long flag names, without "--"
}

var flagRE = regexp.MustCompile(`(?:^|[\s(\[|])--([a-z][a-z0-9-]*)`)

// CLIUses returns the invocations of program (e.g. "oncekey") in the docs' code: a code span or
// code line where program appears as a word (alone, or as a path ending in /program), followed by
// its arguments up to a shell separator (| ; && # >). In a file named cliRef (e.g. "docs/cli.md"),
// the code span in the first cell of a table row is an invocation without the program name.
func (r *Repo) CLIUses(program, cliRef string) []CLIUse {
	progRE := regexp.MustCompile(`(?:^|[\s(])(?:[^\s()]*/)?` + regexp.QuoteMeta(program) + `(?:\s+|$)`)
	var out []CLIUse
	for _, d := range r.Docs {
		for _, s := range d.codeSpans() {
			var cmds []string
			if s.cell && d.Path == cliRef {
				cmds = append(cmds, s.text)
			}
			for _, loc := range progRE.FindAllStringIndex(s.text, -1) {
				cmds = append(cmds, s.text[loc[1]:])
			}
			for _, c := range cmds {
				if u, ok := parseUse(c); ok {
					u.File, u.Line = d.Path, s.line
					out = append(out, u)
				}
			}
		}
	}
	return out
}

// parseUse reads the words of one command line up to a shell separator (a table's escaped \| is
// an alternative, not a pipe).
func parseUse(c string) (CLIUse, bool) {
	c = strings.ReplaceAll(c, `\|`, " ")
	if i := strings.IndexAny(c, "|;#>"); i >= 0 {
		c = c[:i]
	}
	if i := strings.Index(c, "&&"); i >= 0 {
		c = c[:i]
	}
	var u CLIUse
	for _, m := range flagRE.FindAllStringSubmatch(c, -1) {
		u.Flags = append(u.Flags, m[1])
	}
	for _, w := range strings.Fields(c) {
		if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
			break
		}
		u.Args = append(u.Args, w)
	}
	return u, len(u.Args) > 0 || len(u.Flags) > 0
}

// CheckCLI reports every invocation in uses whose subcommand or long flag does not exist in the
// command tree of root. The first argument must be a subcommand; further words are arguments
// unless they name a subcommand of the one found so far.
func CheckCLI(root *cobra.Command, uses []CLIUse) []Problem {
	var out []Problem
	for _, u := range uses {
		cmd := root
		for i, a := range u.Args {
			sub := findSub(cmd, a)
			if sub == nil {
				if i == 0 && cmd.HasSubCommands() {
					out = append(out, Problem{u.File, u.Line, fmt.Sprintf("`%s %s`: no such command (commands: %s)", root.Name(), a, strings.Join(subNames(cmd), ", "))})
					cmd = nil
				}
				break
			}
			cmd = sub
		}
		if cmd == nil {
			continue
		}
		for _, f := range u.Flags {
			if f == "help" || lookupFlag(cmd, f) {
				continue
			}
			out = append(out, Problem{u.File, u.Line, fmt.Sprintf("`%s --%s`: %q has no flag --%s", cmd.CommandPath(), f, cmd.CommandPath(), f)})
		}
	}
	return out
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || slices.Contains(s.Aliases, name) {
			return s
		}
	}
	return nil
}

func subNames(c *cobra.Command) []string {
	var out []string
	for _, s := range c.Commands() {
		out = append(out, s.Name())
	}
	sort.Strings(out)
	return out
}

func lookupFlag(c *cobra.Command, name string) bool {
	if c.Flags().Lookup(name) != nil {
		return true
	}
	for p := c; p != nil; p = p.Parent() {
		if p.PersistentFlags().Lookup(name) != nil {
			return true
		}
	}
	return false
}

// ---- Go code blocks ----

var codeMarkerRE = regexp.MustCompile(`^<!--\s*code:\s*(\S+)\s*-->$`)

// Elided reports whether a line of a Go code block stands for lines left out ("// …" or "…"),
// which the excerpt check skips.
func Elided(line string) bool {
	t := strings.TrimSpace(line)
	return t == "…" || t == "..." || strings.HasPrefix(t, "// …") || strings.HasPrefix(t, "// ...")
}

// CheckGoBlocks reports every ```go code block that is not an excerpt of a compiled Go file. A
// block must follow, on the line before it (blank lines between allowed), a marker
//
//	<!-- code: path/to/file.go -->
//
// naming a .go file of the module (relative to the repository root, not under testdata, without
// an ignore build tag), so that `go vet ./...` compiles it; and each line of the block, leading
// and trailing space trimmed, blank and elided lines (see Elided) skipped, must appear in that
// file in the same order.
func (r *Repo) CheckGoBlocks() []Problem {
	var out []Problem
	for _, d := range r.Docs {
		for _, b := range d.blocks {
			if lang, _, _ := strings.Cut(b.info, " "); lang != "go" {
				continue
			}
			marker := ""
			for j := b.open - 1; j >= 0; j-- {
				t := strings.TrimSpace(d.Lines[j])
				if t == "" {
					continue
				}
				if m := codeMarkerRE.FindStringSubmatch(t); m != nil {
					marker = m[1]
				}
				break
			}
			if marker == "" {
				out = append(out, Problem{d.Path, b.open + 1, "Go code block without a `<!-- code: path/to/file.go -->` line before it: show an excerpt of a compiled file (an Example function or an example program), never code no build checks"})
				continue
			}
			if msg := r.checkExcerpt(marker, b.body, b.open+2); msg != "" {
				out = append(out, Problem{d.Path, b.open + 1, msg})
			}
		}
	}
	return out
}

func (r *Repo) checkExcerpt(file string, block []string, firstLine int) string {
	rel := path.Clean(file)
	if !strings.HasSuffix(rel, ".go") || rel == ".." || strings.HasPrefix(rel, "../") || strings.HasPrefix(rel, "/") {
		return fmt.Sprintf("code marker %q: not a .go file of the repository", file)
	}
	for _, dir := range strings.Split(path.Dir(rel), "/") {
		if skipDir(dir) {
			return fmt.Sprintf("code marker %q: %s is not compiled by go vet ./... (under %s)", file, rel, dir)
		}
	}
	b, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Sprintf("code marker %q: %v", file, err)
	}
	var src []string
	for _, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "//go:build") && regexp.MustCompile(`\bignore\b`).MatchString(t) {
			return fmt.Sprintf("code marker %q: %s has an ignore build tag, so nothing compiles it", file, rel)
		}
		src = append(src, t)
	}
	j := 0
	for k, l := range block {
		t := strings.TrimSpace(l)
		if t == "" || Elided(t) {
			continue
		}
		for j < len(src) && src[j] != t {
			j++
		}
		if j == len(src) {
			return fmt.Sprintf("line %d of the block (%q) is not in %s after the lines before it: copy the excerpt from the file again", firstLine+k, t, rel)
		}
		j++
	}
	return ""
}
