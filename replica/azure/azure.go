// Package azure is the Azure Blob Storage backend of replica.Store, built on
// azblob. Conditional creates are Put Blob with If-None-Match: *, conditional
// replaces Put Blob with If-Match.
//
// It imports replica and the Azure SDK; nothing else in sluice.
package azure

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/sluicedb/sluice/replica"
)

// Config locates a container prefix. Account and key come from
// AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY when empty.
type Config struct {
	Container  string
	Prefix     string // without leading or trailing '/'
	Endpoint   string // service URL; default https://ACCOUNT.blob.core.windows.net (Azurite: http://127.0.0.1:10000/devstoreaccount1)
	AccountKey string
	Account    string
}

// ParseURL parses abs://[ACCOUNT@]container/prefix?endpoint=… (az:// is accepted too).
func ParseURL(u *url.URL) (Config, error) {
	if u.Scheme != "abs" && u.Scheme != "az" {
		return Config{}, fmt.Errorf("azure store: URL %q: scheme must be abs", u.Redacted())
	}
	c := Config{Container: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: u.Query().Get("endpoint")}
	if u.User != nil { // Litestream's abs://ACCOUNT@CONTAINER/PATH
		c.Account = u.User.Username()
	}
	if c.Container == "" {
		return Config{}, fmt.Errorf("azure store: URL %q has no container: use abs://CONTAINER/PREFIX", u.Redacted())
	}
	return c, nil
}

// Store is a replica.Store on one Azure container prefix.
type Store struct {
	cfg       Config
	container *container.Client
}

var _ replica.Store = (*Store)(nil)

// OpenURL parses an abs:// URL and opens the store.
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	cfg, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}

// sharedHTTPClient pools connections across every store of the process:
// uploads are on the write path.
var sharedHTTPClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:          256,
	MaxIdleConnsPerHost:   128,
	MaxConnsPerHost:       replica.MaxConnsPerHost,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
	ForceAttemptHTTP2:     true,
}}

// New opens a store. It makes no request.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Container == "" {
		return nil, errors.New("azure store: no container given")
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Account == "" {
		cfg.Account = os.Getenv("AZURE_STORAGE_ACCOUNT")
	}
	if cfg.AccountKey == "" {
		cfg.AccountKey = os.Getenv("AZURE_STORAGE_KEY")
	}
	if cfg.Account == "" || cfg.AccountKey == "" {
		return nil, fmt.Errorf("azure store: container %s: set AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY", cfg.Container)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "https://" + cfg.Account + ".blob.core.windows.net"
	}
	cred, err := container.NewSharedKeyCredential(cfg.Account, cfg.AccountKey)
	if err != nil {
		return nil, fmt.Errorf("azure store: account %s: invalid AZURE_STORAGE_KEY: %w", cfg.Account, err)
	}
	containerURL := strings.TrimSuffix(cfg.Endpoint, "/") + "/" + url.PathEscape(cfg.Container)
	client, err := container.NewClientWithSharedKeyCredential(containerURL, cred, &container.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: sharedHTTPClient},
	})
	if err != nil {
		return nil, fmt.Errorf("azure store: client for %s: %w", containerURL, err)
	}
	return &Store{cfg: cfg, container: client}, nil
}

// String returns the store's URL.
func (s *Store) String() string {
	u := "abs://" + s.cfg.Container + "/" + s.cfg.Prefix
	if s.cfg.Endpoint != "" {
		u += "?endpoint=" + s.cfg.Endpoint
	}
	return u
}

// Close releases nothing: connections are pooled per process.
func (s *Store) Close() error { return nil }

func (s *Store) blobName(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

// putTokenKey is blob metadata holding a random token per call, so that a
// refusal answered to the SDK's retry of our own successful upload is
// recognised as ours. (Metadata names must be C# identifiers: no dashes.)
const putTokenKey = "sluiceputtoken"

// singlePutLimit is the largest body sent as one Put Blob; larger or
// unseekable bodies are staged as blocks (conditions apply at commit).
const singlePutLimit = 256 << 20

// PutIfAbsent uploads key with If-None-Match: *.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.put(ctx, "put-if-absent", key, r, size, &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)})
}

// PutIfMatch uploads key with If-Match: etag.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	if etag == "" {
		return replica.ObjectInfo{}, fmt.Errorf("put-if-match %s in %s: empty ETag: %w", key, s, replica.ErrPreconditionFailed)
	}
	return s.put(ctx, "put-if-match", key, r, size, &blob.ModifiedAccessConditions{IfMatch: to.Ptr(azcore.ETag(etag))})
}

// Put uploads key unconditionally.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.put(ctx, "put", key, r, size, nil)
}

func (s *Store) put(ctx context.Context, op, key string, r io.Reader, size int64, cond *blob.ModifiedAccessConditions) (replica.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, classify(err))
	}
	bb := s.container.NewBlockBlobClient(s.blobName(key))
	token := newToken()
	meta := map[string]*string{putTokenKey: to.Ptr(token)}
	var access *blob.AccessConditions
	if cond != nil {
		access = &blob.AccessConditions{ModifiedAccessConditions: cond}
	}
	var etag *azcore.ETag
	var modTime *time.Time
	var err error
	var n int64
	if section, ok, serr := remaining(r); serr != nil {
		return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: measure body: %w", op, key, s, serr)
	} else if ok && size >= 0 && section.Size() != size {
		return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: body is %d bytes, caller declared %d", op, key, s, section.Size(), size)
	} else if ok && section.Size() <= singlePutLimit {
		// One Put Blob: the SDK rewinds the body on retries.
		var resp blockblob.UploadResponse
		resp, err = bb.Upload(ctx, streaming.NopCloser(section), &blockblob.UploadOptions{Metadata: meta, AccessConditions: access})
		etag, modTime, n = resp.ETag, resp.LastModified, section.Size()
	} else {
		cr := &countingReader{r: r}
		var resp blockblob.UploadStreamResponse
		resp, err = bb.UploadStream(ctx, cr, &blockblob.UploadStreamOptions{Metadata: meta, AccessConditions: access})
		etag, modTime, n = resp.ETag, resp.LastModified, cr.n
		if err == nil && size >= 0 && n != size {
			// Too late to refuse: the blob is committed. Report it loudly.
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: body was %d bytes, caller declared %d", op, key, s, n, size)
		}
	}
	if err != nil {
		switch {
		case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists, bloberror.TargetConditionNotMet):
			if info, ok := s.ownedBy(ctx, key, token); ok {
				return info, nil // an SDK retry of our own successful upload
			}
			if cond != nil && cond.IfNoneMatch != nil {
				return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrExists)
			}
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrPreconditionFailed)
		case bloberror.HasCode(err, bloberror.BlobNotFound):
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrNotFound)
		default:
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, classify(err))
		}
	}
	info := replica.ObjectInfo{Key: key, Size: n}
	if etag != nil {
		info.ETag = string(*etag)
	}
	if modTime != nil {
		info.ModTime = *modTime
	}
	return info, nil
}

func (s *Store) ownedBy(ctx context.Context, key, token string) (replica.ObjectInfo, bool) {
	props, err := s.container.NewBlobClient(s.blobName(key)).GetProperties(ctx, nil)
	if err != nil {
		return replica.ObjectInfo{}, false
	}
	for k, v := range props.Metadata {
		if strings.EqualFold(k, putTokenKey) && v != nil && *v == token {
			return propsInfo(key, props), true
		}
	}
	return replica.ObjectInfo{}, false
}

func propsInfo(key string, p blob.GetPropertiesResponse) replica.ObjectInfo {
	info := replica.ObjectInfo{Key: key}
	if p.ContentLength != nil {
		info.Size = *p.ContentLength
	}
	if p.ETag != nil {
		info.ETag = string(*p.ETag)
	}
	if p.LastModified != nil {
		info.ModTime = *p.LastModified
	}
	return info
}

// Get opens the whole object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange opens length bytes from offset (length < 0: to the end).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	opts := &blob.DownloadStreamOptions{}
	if offset > 0 || length > 0 {
		opts.Range = blob.HTTPRange{Offset: offset, Count: max(length, 0)} // Count 0: to the end
	}
	resp, err := s.container.NewBlobClient(s.blobName(key)).DownloadStream(ctx, opts)
	if bloberror.HasCode(err, bloberror.BlobNotFound) {
		return nil, fmt.Errorf("get %s from %s: %w", key, s, replica.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("get %s from %s (offset %d, length %d): %w", key, s, offset, length, classify(err))
	}
	return resp.Body, nil
}

// Stat returns the blob's properties.
func (s *Store) Stat(ctx context.Context, key string) (replica.ObjectInfo, error) {
	props, err := s.container.NewBlobClient(s.blobName(key)).GetProperties(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound) || isBare404(err) {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, replica.ErrNotFound)
	} else if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, classify(err))
	}
	return propsInfo(key, props), nil
}

// isBare404 recognises a HEAD 404 (no body, so no error code) that is not
// about the container.
func isBare404(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound && re.ErrorCode == ""
}

// deleteParallelism bounds concurrent single-blob deletes.
const deleteParallelism = 16

// Delete removes keys, ignoring missing ones.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete from %s: %w", s, classify(err))
	}
	sem := make(chan struct{}, deleteParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := s.container.NewBlobClient(s.blobName(k)).Delete(ctx, nil)
			if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("delete %s from %s: %w", k, s, classify(err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// List pages through the blobs under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]replica.ObjectInfo, error) {
	full := s.blobName(prefix)
	if s.cfg.Prefix != "" && prefix == "" {
		full = s.cfg.Prefix + "/"
	}
	pager := s.container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(full)})
	var out []replica.ObjectInfo
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %q in %s: %w", prefix, s, classify(err))
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil || b.Properties == nil {
				continue
			}
			info := replica.ObjectInfo{Key: strings.TrimPrefix(*b.Name, s.cfg.Prefix+"/")}
			if s.cfg.Prefix == "" {
				info.Key = *b.Name
			}
			if b.Properties.ContentLength != nil {
				info.Size = *b.Properties.ContentLength
			}
			if b.Properties.ETag != nil {
				info.ETag = string(*b.Properties.ETag)
			}
			if b.Properties.LastModified != nil {
				info.ModTime = *b.Properties.LastModified
			}
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// remaining returns the unread part of a seekable r as a SectionReader
// (ok=false if r cannot seek).
func remaining(r io.Reader) (*io.SectionReader, bool, error) {
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		return nil, false, nil
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false, err
	}
	end, err := rs.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, false, err
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return nil, false, err
	}
	if ra, ok := r.(io.ReaderAt); ok {
		return io.NewSectionReader(ra, start, end-start), true, nil
	}
	return io.NewSectionReader(seekReaderAt{rs}, start, end-start), true, nil
}

// seekReaderAt adapts a ReadSeeker to ReaderAt for sequential use.
type seekReaderAt struct{ rs io.ReadSeeker }

func (s seekReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if _, err := s.rs.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(s.rs, p)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
