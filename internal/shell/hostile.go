package shell

// Hostile are values a workflow can choose for a tenant, a workflow ID, a step ID or a schema
// name that a printed command must carry as one inert word: shell syntax, quotes, control and
// format characters, invalid UTF-8. Tests of every place that prints a command use them.
var Hostile = []string{
	"acme", "acme corp", "", "it's", "a'b'c", "$(touch /tmp/oncekey-pwned)", "`touch /tmp/oncekey-pwned`",
	"x; rm -rf ~", "x && echo pwned", "a|b", "semi;colon", "new\nline", "cr\rreturn", "tab\there",
	"\x1b[31mred\x1b[0m", "\x1b]0;title\a", "nul\x00byte", "bad\xffutf8", "bidi\u202eevil", "del\x7f",
	"c1\u0085next", "back\\slash", "dollar$HOME", "${IFS}", "!history", "*glob?", "~tilde", "#comment",
	"é-accent", "emoji 🙂", "zero\u200bwidth", "-leading-dash",
}
