package s3_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
)

// Configuration errors are classified, short, and permanent; a store that
// does not answer is transient.
func TestErrorClassification(t *testing.T) {
	mn := testenv.MinIO(t)
	bucket := mn.NewBucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if err := replica.Probe(ctx, open(t, mn.URL(bucket, "ok"))); err != nil {
		t.Fatalf("probe of a usable bucket: %v", err)
	}
	check := func(name string, err, kind error, permanent bool) {
		t.Helper()
		if !errors.Is(err, kind) || replica.Permanent(err) != permanent {
			t.Fatalf("%s: got %v (permanent %v), want %v (permanent %v)", name, err, replica.Permanent(err), kind, permanent)
		}
		if len(err.Error()) > 400 || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: message not short: %q", name, err)
		}
	}
	check("missing bucket", replica.Probe(ctx, open(t, mn.URL("no-such-bucket-x", "p"))), replica.ErrNoBucket, true)
	check("invalid bucket name", replica.Probe(ctx, open(t, mn.URL("bk", "p"))), replica.ErrNoBucket, true)
	check("unresolvable endpoint", replica.Probe(ctx, open(t, "s3://b/p?endpoint=http://no-such-host.invalid:9000&force-path-style=true&region=us-east-1")), replica.ErrBadEndpoint, true)
	port := testenv.FreePort()
	check("refused connection", replica.Probe(ctx, open(t, "s3://b/p?force-path-style=true&region=us-east-1&endpoint=http://127.0.0.1:"+strconv.Itoa(port))), replica.ErrUnavailable, false)

	t.Setenv("AWS_ACCESS_KEY_ID", "not-a-key")
	check("unknown key", replica.Probe(ctx, open(t, mn.URL(bucket, "p"))), replica.ErrAccessDenied, true)

	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	check("no credentials", replica.Probe(ctx, open(t, mn.URL(bucket, "p"))), replica.ErrNoCredentials, true)
}
