// Command encryption shows oncekey's stored results encrypted at rest and bound to their record.
// A converter.PayloadCodec (AES-256-GCM) goes into the client's data converter, and the oncekey
// plugin, given to the client, stores results through that converter. The codec cannot know which
// record a payload lands in, so the plugin also gets a oncekey.ResultSealer (Sealer, AES-256-GCM
// with the tenant and the operation key as additional data): a stored result moved or copied to
// another row or tenant does not open, and a plain one is refused. Postgres holds ciphertext,
// while a repeat of the operation still gets the decoded result. For comparison, the same call is
// then made without either, and its stored result holds the secret in plain text.
//
// The key comes from ONCEKEY_ENCRYPTION_KEY (32 bytes, standard base64: `openssl rand -base64
// 32`); without it a random key is generated for this run. It starts a Temporal dev server
// unless TEMPORAL_ADDRESS is set, and uses Postgres from DATABASE_URL or the libpq variables in a
// schema of its own, dropped at exit.
//
// Exit codes: 0 the encrypted result was sealed, held no plain text and decoded correctly; 1
// otherwise; 2 the environment is not usable.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/oncekey/oncekey/examples/internal/exampleenv"
)

// KeyEnv is the environment variable holding the encryption key.
const KeyEnv = "ONCEKEY_ENCRYPTION_KEY"

func main() { os.Exit(run(os.Getenv, os.Stdout, os.Stderr)) }

func run(getenv func(string) string, stdout, stderr io.Writer) int {
	key, generated, err := KeyFromEnv(getenv, KeyEnv)
	if err != nil {
		fmt.Fprintf(stderr, "encryption: %v\n", err)
		return 2
	}
	codec, err := NewCodec(key)
	if err != nil {
		fmt.Fprintf(stderr, "encryption: %v\n", err)
		return 2
	}
	sealer, err := NewSealer(key)
	if err != nil {
		fmt.Fprintf(stderr, "encryption: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := exampleenv.Open(ctx, "encryption", exampleenv.Options{}, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer env.Close()
	pg, tc := env.PG, env.Temporal
	if generated {
		fmt.Fprintf(stdout, "key: generated for this run (set %s to use yours), key ID %s\n\n", KeyEnv, codec.KeyID())
	} else {
		fmt.Fprintf(stdout, "key: from %s, key ID %s\n\n", KeyEnv, codec.KeyID())
	}

	enc, err := Run(ctx, Config{Client: tc.Client, Pool: pg.Pool, Codec: codec, Sealer: sealer})
	if err != nil {
		fmt.Fprintf(stderr, "encryption: %v\n", err)
		return 1
	}
	printReport(stdout, "with the codec and the sealer", enc)
	plain, err := Run(ctx, Config{Client: tc.Client, Pool: pg.Pool})
	if err != nil {
		fmt.Fprintf(stderr, "encryption: %v\n", err)
		return 1
	}
	printReport(stdout, "without either, for comparison", plain)

	if problems := check(enc); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "encryption: %s\n", p)
		}
		return 1
	}
	fmt.Fprintf(stdout, "encryption: sealed=%t stored_encoding=%s plaintext_in_row=%t replay_matches=%t\n",
		enc.Sealed, enc.StoredEncoding, enc.PlaintextStored, enc.Result.Again == enc.Result.First)
	return 0
}

// check lists what is wrong with an encrypted run.
func check(rep *Report) []string {
	var out []string
	if rep.PlaintextStored {
		out = append(out, "the gift card code is stored in plain text")
	}
	if !rep.Sealed {
		out = append(out, "the stored result is not sealed to its record")
	}
	if rep.StoredEncoding != EncodingEncrypted {
		out = append(out, fmt.Sprintf("the stored payload's encoding is %q, want %q", rep.StoredEncoding, EncodingEncrypted))
	}
	if rep.Decoded != rep.Result.First {
		out = append(out, "the stored result does not decode to the tool's result")
	}
	if rep.Result.Again != rep.Result.First {
		out = append(out, "the repeat got another gift card")
	}
	if rep.ToolRuns != 1 {
		out = append(out, fmt.Sprintf("the tool ran %d time(s), want 1", rep.ToolRuns))
	}
	return out
}

func printReport(w io.Writer, title string, rep *Report) {
	fmt.Fprintf(w, "%s: workflow %s, operation key %s\n", title, rep.WorkflowID, rep.OperationKey)
	fmt.Fprintf(w, "  the tool ran %d time(s) and issued card %s; the repeat got %s from the stored result\n", rep.ToolRuns, rep.Result.First.Code, rep.Result.Again.Code)
	fmt.Fprintf(w, "  Postgres holds %d bytes, sealed to the record: %t, payload encoding %q; the code appears in them: %t\n", len(rep.StoredResult), rep.Sealed, rep.StoredEncoding, rep.PlaintextStored)
	fmt.Fprintf(w, "  opened and decoded with this run's sealer and data converter: %s\n\n", rep.Decoded.Code)
}
