// Package s3 is the S3 (and S3-compatible: MinIO, R2, Linode, …) backend of
// replica.Store, built on aws-sdk-go-v2. Conditional creates are PutObject with
// If-None-Match: *, conditional replaces PutObject with If-Match.
//
// It imports replica and the AWS SDK; nothing else in sluice.
package s3

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Config locates a bucket prefix. Credentials come from the standard AWS chain
// (environment, shared config, instance role).
type Config struct {
	Bucket         string
	Prefix         string // key prefix, without leading or trailing '/'
	Region         string // default: from the AWS config, else us-east-1 when Endpoint is set
	Endpoint       string // e.g. http://127.0.0.1:9000 for MinIO; empty for AWS
	ForcePathStyle bool   // bucket in the path rather than the host name (MinIO needs it)
	SkipVerify     bool   // accept any TLS certificate (self-signed test endpoints only)
}

// ParseURL parses s3://bucket/prefix?endpoint=…&region=…&force-path-style=true&skip-verify=true.
// forcePathStyle and skipVerify are accepted as spellings too.
func ParseURL(u *url.URL) (Config, error) {
	if u.Scheme != "s3" {
		return Config{}, fmt.Errorf("s3 store: URL %q: scheme must be s3", u.Redacted())
	}
	c := Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if c.Bucket == "" {
		return Config{}, fmt.Errorf("s3 store: URL %q has no bucket: use s3://BUCKET/PREFIX", u.Redacted())
	}
	q := u.Query()
	c.Endpoint = q.Get("endpoint")
	c.Region = q.Get("region")
	var err error
	if c.ForcePathStyle, err = boolParam(q, "force-path-style", "forcePathStyle"); err != nil {
		return Config{}, fmt.Errorf("s3 store: URL %q: %w", u.Redacted(), err)
	}
	if c.SkipVerify, err = boolParam(q, "skip-verify", "skipVerify"); err != nil {
		return Config{}, fmt.Errorf("s3 store: URL %q: %w", u.Redacted(), err)
	}
	if c.Endpoint != "" && !strings.Contains(c.Endpoint, "://") {
		c.Endpoint = "https://" + c.Endpoint
	}
	return c, nil
}

func boolParam(q url.Values, names ...string) (bool, error) {
	for _, n := range names {
		if v := q.Get(n); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return false, fmt.Errorf("parameter %s=%q is not a boolean", n, v)
			}
			return b, nil
		}
	}
	return false, nil
}

// Store is a replica.Store on one S3 bucket prefix.
type Store struct {
	cfg    Config
	client *s3.Client
}

var _ replica.Store = (*Store)(nil)

// OpenURL parses an s3:// URL and opens the store.
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	cfg, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}

// New opens a store. It makes no request: a wrong bucket or credentials show
// up on the first call.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: no bucket given")
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	awsCfg, err := loadAWSConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.ForcePathStyle
		// LTX files carry their own CRC-64; validating response checksums only
		// adds a warning per ranged GET from stores that send none.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{cfg: cfg, client: client}, nil
}

// awsConfigs caches one aws.Config (and so one HTTP client and connection
// pool) per endpoint/region/TLS setting and AWS environment: a server with many databases opens
// many stores against one endpoint and uploads sit on its write path.
var (
	awsConfigsMu sync.Mutex
	awsConfigs   = map[string]aws.Config{}
)

func loadAWSConfig(ctx context.Context, cfg Config) (aws.Config, error) {
	// The environment is part of the key: LoadDefaultConfig reads it once.
	cacheKey := strings.Join([]string{cfg.Endpoint, cfg.Region, strconv.FormatBool(cfg.SkipVerify),
		os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_PROFILE"), os.Getenv("AWS_REGION"), os.Getenv("AWS_CA_BUNDLE")}, "|")
	awsConfigsMu.Lock()
	defer awsConfigsMu.Unlock()
	if c, ok := awsConfigs[cacheKey]; ok {
		return c.Copy(), nil
	}
	// A BuildableClient (not a plain http.Client) so that LoadDefaultConfig can
	// apply AWS_CA_BUNDLE to its transport.
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = 256
		tr.MaxIdleConnsPerHost = 128
		tr.MaxConnsPerHost = replica.MaxConnsPerHost
		tr.IdleConnTimeout = 90 * time.Second
		if cfg.SkipVerify {
			if tr.TLSClientConfig == nil {
				tr.TLSClientConfig = &tls.Config{}
			}
			tr.TLSClientConfig.InsecureSkipVerify = true
		}
	})
	// No SDK log lines: its IMDS fallback warnings repeat on every request
	// without credentials; failures reach the caller as classified errors.
	opts := []func(*config.LoadOptions) error{config.WithHTTPClient(httpClient), config.WithLogger(logging.Nop{})}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("s3 store: load AWS configuration (credentials, region, AWS_CA_BUNDLE=%q): %w", os.Getenv("AWS_CA_BUNDLE"), err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return aws.Config{}, errors.New("s3 store: no region: add ?region=… to the URL or set AWS_REGION")
		}
		awsCfg.Region = "us-east-1" // S3-compatible services mostly ignore it, but signing needs one
	}
	if awsCfg.Credentials != nil {
		awsCfg.Credentials = markedCredentials{awsCfg.Credentials}
	}
	awsConfigs[cacheKey] = awsCfg
	return awsCfg.Copy(), nil
}

// String returns the store's URL.
func (s *Store) String() string {
	u := "s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix
	if s.cfg.Endpoint != "" {
		u += "?endpoint=" + s.cfg.Endpoint
	}
	return u
}

// Close releases nothing: connections are pooled per endpoint.
func (s *Store) Close() error { return nil }

func (s *Store) objectKey(key string) string { return s.underPrefix(toLitestreamS3Key(key)) }

// underPrefix puts a key already in the S3 layout under the store's prefix.
func (s *Store) underPrefix(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

// relKey turns a full object key back into a store key.
func (s *Store) relKey(full string) string {
	if s.cfg.Prefix != "" {
		full = strings.TrimPrefix(full, s.cfg.Prefix+"/")
	}
	return fromLitestreamS3Key(full)
}

// Litestream 0.5's S3 client names LTX objects <prefix>/<level as %04x>/<file>
// where its other backends use <prefix>/ltx/<level>/<file>. The S3 store maps
// the shared layout (replica.LTXKey, also under a sub-prefix such as a served
// database's "<name>/") onto the S3 one so both tools read each other's replicas.
func toLitestreamS3Key(key string) string {
	mapped := toLitestreamS3Dir(key) // ".../ltx/<level>/<file or empty>"
	if name := key[strings.LastIndex(key, "/")+1:]; mapped != key && name != "" {
		if _, _, err := ltx.ParseFilename(name); err != nil {
			return key
		}
	}
	return mapped
}

// toLitestreamS3Dir maps a key's ".../ltx/<level>/" directory like
// toLitestreamS3Key whatever follows it, for StartAfter keys such as
// "ltx/0/~" (after every level-0 file). Within a level both layouts sort
// alike, and levels 0..9 map to 0000..0009 in order.
func toLitestreamS3Dir(key string) string {
	parts := strings.Split(key, "/")
	n := len(parts)
	if n < 3 || parts[n-3] != replica.LTXDir {
		return key
	}
	level, err := strconv.Atoi(parts[n-2])
	if err != nil || level < 0 || level > replica.MaxLevel || parts[n-2] != strconv.Itoa(level) {
		return key
	}
	return strings.Join(append(parts[:n-3:n-3], fmt.Sprintf("%04x", level), parts[n-1]), "/")
}

func fromLitestreamS3Key(key string) string {
	parts := strings.Split(key, "/")
	n := len(parts)
	if n < 2 || len(parts[n-2]) != 4 {
		return key
	}
	level, err := strconv.ParseUint(parts[n-2], 16, 16)
	if err != nil || level > replica.MaxLevel {
		return key
	}
	if _, _, err := ltx.ParseFilename(parts[n-1]); err != nil {
		return key
	}
	return strings.Join(append(parts[:n-2:n-2], replica.LTXDir, strconv.Itoa(int(level)), parts[n-1]), "/")
}

// putTokenKey is user metadata holding a random token per call, so that a 412
// answered to an SDK retry of our own successful request is recognised as ours.
const putTokenKey = "sluice-put-token"

// conflictRetries bounds retries of a 409 ConditionalRequestConflict (another
// conditional write on the same key was in flight).
const conflictRetries = 5

// PutIfAbsent uploads key with If-None-Match: *.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.put(ctx, "put-if-absent", key, r, size, func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
}

// PutIfMatch uploads key with If-Match: etag.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	if etag == "" {
		return replica.ObjectInfo{}, fmt.Errorf("put-if-match %s in %s: empty ETag: %w", key, s, replica.ErrPreconditionFailed)
	}
	return s.put(ctx, "put-if-match", key, r, size, func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) })
}

// Put uploads key unconditionally.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.put(ctx, "put", key, r, size, func(*s3.PutObjectInput) {})
}

func (s *Store) put(ctx context.Context, op, key string, r io.Reader, size int64, cond func(*s3.PutObjectInput)) (replica.ObjectInfo, error) {
	body, size, cleanup, err := seekable(r, size)
	if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: buffer body: %w", op, key, s, err)
	}
	defer cleanup()
	token := newToken()
	for attempt := 0; ; attempt++ {
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: rewind body: %w", op, key, s, err)
		}
		in := &s3.PutObjectInput{
			Bucket:        aws.String(s.cfg.Bucket),
			Key:           aws.String(s.objectKey(key)),
			Body:          body,
			ContentLength: aws.Int64(size),
			Metadata:      map[string]string{putTokenKey: token},
		}
		cond(in)
		out, err := s.client.PutObject(ctx, in)
		if err == nil {
			return replica.ObjectInfo{Key: key, Size: size, ModTime: time.Now(), ETag: aws.ToString(out.ETag)}, nil
		}
		switch status := httpStatus(err); {
		case status == http.StatusConflict && attempt < conflictRetries:
			// A concurrent conditional write on this key: the next attempt
			// sees its outcome (usually 412).
			select {
			case <-ctx.Done():
				return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, ctx.Err())
			case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
			}
			continue
		case status == http.StatusConflict:
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: still conflicting with concurrent conditional writes after %d attempts; retry later: %w", op, key, s, attempt+1, err)
		case status == http.StatusPreconditionFailed:
			if info, ok := s.ownedBy(ctx, key, token); ok {
				return info, nil // an SDK retry of our own successful request
			}
			if in.IfNoneMatch != nil {
				return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrExists)
			}
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrPreconditionFailed)
		case isNotFound(err):
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrNotFound)
		default:
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, classify(err))
		}
	}
}

// ownedBy reports whether key currently holds the upload tagged with token.
func (s *Store) ownedBy(ctx context.Context, key, token string) (replica.ObjectInfo, bool) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.objectKey(key))})
	if err != nil || out.Metadata[putTokenKey] != token {
		return replica.ObjectInfo{}, false
	}
	return replica.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag)}, true
}

// Get opens the whole object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange opens length bytes from offset (length < 0: to the end).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		// HTTP ranges cannot be empty; still report a missing object.
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.objectKey(key))}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	} // offset 0 to the end: no Range, which also works on empty objects
	out, err := s.client.GetObject(ctx, in)
	if isNotFound(err) {
		return nil, fmt.Errorf("get %s from %s: %w", key, s, replica.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("get %s from %s (offset %d, length %d): %w", key, s, offset, length, classify(err))
	}
	return out.Body, nil
}

// Stat returns the object's metadata (HeadObject).
func (s *Store) Stat(ctx context.Context, key string) (replica.ObjectInfo, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.objectKey(key))})
	if isNotFound(err) {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, replica.ErrNotFound)
	} else if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, classify(err))
	}
	return replica.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag)}, nil
}

// deleteBatch is DeleteObjects' limit per request.
const deleteBatch = 1000

// Delete removes keys with DeleteObjects, 1000 per request.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete from %s: %w", s, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), deleteBatch)
		batch := keys[:n]
		keys = keys[n:]
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(s.objectKey(k))}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.cfg.Bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("delete %d objects (first %s) from %s: %w", len(batch), batch[0], s, classify(err))
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			return fmt.Errorf("delete %s from %s: %s: %s (and %d more errors)", s.relKey(aws.ToString(e.Key)), s, aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1)
		}
	}
	return nil
}

// List pages through ListObjectsV2 under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]replica.ObjectInfo, error) {
	return s.ListAfter(ctx, prefix, "")
}

// ListAfter is List starting after a key (StartAfter): a restore lists the
// level-0 files past what the upper levels hold without paging through the
// thousands before them.
func (s *Store) ListAfter(ctx context.Context, prefix, after string) ([]replica.ObjectInfo, error) {
	full := s.objectKey(prefix)
	if s.cfg.Prefix != "" && prefix == "" {
		full = s.cfg.Prefix + "/"
	}
	if dir, partial := partialLTXPrefix(prefix); partial {
		// "ltx", "x/ltx/", "x/ltx/1": LTX levels sit one level up on S3, so
		// list the parent and keep what maps back under the prefix.
		all, err := s.ListAfter(ctx, dir, after)
		if err != nil {
			return nil, err
		}
		var out []replica.ObjectInfo
		for _, o := range all {
			if strings.HasPrefix(o.Key, prefix) {
				out = append(out, o)
			}
		}
		return out, nil
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(full)}
	if after != "" {
		in.StartAfter = aws.String(s.underPrefix(toLitestreamS3Dir(after)))
	}
	p := s3.NewListObjectsV2Paginator(s.client, in)
	var out []replica.ObjectInfo
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %q in %s: %w", prefix, s, classify(err))
		}
		for _, o := range page.Contents {
			if after != "" && s.relKey(aws.ToString(o.Key)) <= after {
				continue // StartAfter is in the S3 layout's order; the result is in the store's
			}
			out = append(out, replica.ObjectInfo{
				Key: s.relKey(aws.ToString(o.Key)), Size: aws.ToInt64(o.Size),
				ModTime: aws.ToTime(o.LastModified), ETag: aws.ToString(o.ETag),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		case "NoSuchBucket":
			return false // a configuration error, not a missing object
		}
	}
	return httpStatus(err) == http.StatusNotFound
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// partialLTXPrefix reports whether prefix ends inside an "ltx/<level>/" path
// (not at a whole level directory), and the directory above "ltx" to list.
func partialLTXPrefix(prefix string) (dir string, partial bool) {
	i := strings.LastIndex("/"+prefix, "/"+replica.LTXDir)
	if i < 0 {
		return "", false
	}
	rest := prefix[i+len(replica.LTXDir):] // after "ltx"
	if rest != "" && rest[0] != '/' {
		return "", false // e.g. "ltxfoo": an ordinary key prefix
	}
	if strings.Count(rest, "/") >= 2 {
		return "", false // "ltx/<level>/..." maps directly
	}
	return prefix[:i], true
}

// GetInfo opens the whole object and returns its metadata from the same
// response (replica.InfoGetter): one request where Stat and Get are two.
func (s *Store) GetInfo(ctx context.Context, key string) (io.ReadCloser, replica.ObjectInfo, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.objectKey(key))})
	if isNotFound(err) {
		return nil, replica.ObjectInfo{}, fmt.Errorf("get %s from %s: %w", key, s, replica.ErrNotFound)
	} else if err != nil {
		return nil, replica.ObjectInfo{}, fmt.Errorf("get %s from %s: %w", key, s, classify(err))
	}
	return out.Body, replica.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified),
		ETag: aws.ToString(out.ETag)}, nil
}
