package soak

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// bucketSample is what the bucket holds under the server's replica root.
type bucketSample struct {
	Objects  int // every object (LTX files, leases, metadata)
	L0Files  int // level-0 LTX files, across databases
	L0Behind int // level-0 files not yet covered by any higher level: the compaction backlog
	// MaxTXID sums, over databases, the newest TXID in the bucket: its growth
	// between two samples is the number of level-0 files shipped meanwhile.
	MaxTXID int64
	// Compacted holds the level-1+ file names seen (level/database/name).
	Compacted []string
	// Husks counts LTX-named directories without xl.meta: what MinIO can
	// leave behind when it deletes an object under load. Only a strict scan
	// looks for them; a fast scan counts them as objects.
	Husks int
}

// scanMinIO counts the objects under root, a replica root inside a
// single-drive MinIO's data directory (<data>/<bucket>/<prefix>). MinIO keeps
// each object as a directory holding xl.meta, and sluice's S3 layout puts a
// database's LTX files in <db>/<level as %04x>/<min>-<max>.ltx; reading names
// is far cheaper than a LIST of tens of thousands of keys every window, and
// the final count is checked against a real LIST (listObjects). A strict
// scan also checks that each LTX-named directory still holds xl.meta, which
// costs a stat per object and so is kept for the end.
func scanMinIO(root string, strict bool) (bucketSample, error) {
	var s bucketSample
	dbs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil // nothing shipped yet
	}
	if err != nil {
		return s, fmt.Errorf("read MinIO's data directory %s: %w", root, err)
	}
	for _, db := range dbs {
		if !db.IsDir() {
			continue
		}
		if err := scanDatabase(filepath.Join(root, db.Name()), db.Name(), strict, &s); err != nil {
			return s, err
		}
	}
	return s, nil
}

func scanDatabase(dir, name string, strict bool, s *bucketSample) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	var (
		l0      []ltx.TXID // MaxTXID of each level-0 file
		covered ltx.TXID   // newest TXID of any level above 0
		newest  ltx.TXID
	)
	for _, e := range entries {
		level, isLevel := levelDir(e.Name())
		if !e.IsDir() {
			continue
		}
		if !isLevel {
			n, err := countObjects(filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			s.Objects += n
			continue
		}
		levelPath := filepath.Join(dir, e.Name())
		files, err := os.ReadDir(levelPath)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("read %s: %w", levelPath, err)
		}
		for _, f := range files {
			_, maxTXID, err := ltx.ParseFilename(f.Name())
			if err != nil {
				continue // not an LTX object (MinIO's own entries)
			}
			if strict {
				if _, err := os.Stat(filepath.Join(levelPath, f.Name(), "xl.meta")); err != nil {
					s.Husks++
					continue
				}
			}
			s.Objects++
			newest = max(newest, maxTXID)
			if level == 0 {
				l0 = append(l0, maxTXID)
				continue
			}
			covered = max(covered, maxTXID)
			s.Compacted = append(s.Compacted, strconv.Itoa(level)+"/"+name+"/"+f.Name())
		}
	}
	s.L0Files += len(l0)
	for _, t := range l0 {
		if t > covered {
			s.L0Behind++
		}
	}
	s.MaxTXID += int64(newest)
	return nil
}

// levelDir reports whether a directory name is an LTX level on S3 (%04x).
func levelDir(name string) (int, bool) {
	if len(name) != 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(name, 16, 16)
	if err != nil || v > replica.MaxLevel {
		return 0, false
	}
	return int(v), true
}

// countObjects counts the MinIO objects (directories holding xl.meta) under dir.
func countObjects(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while we walked
			}
			return err
		}
		if !d.IsDir() && d.Name() == "xl.meta" {
			n++
			return fs.SkipDir // the object's parts are not objects
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("walk %s: %w", dir, err)
	}
	return n, nil
}

// listObjects counts the objects under bucket/prefix with a real LIST
// (ListObjectsV2), to check the data-directory count.
func listObjects(ctx context.Context, client *s3.Client, bucket, prefix string) (int, error) {
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "/")})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("list s3://%s/%s/: %w", bucket, prefix, err)
		}
		n += len(page.Contents)
	}
	return n, nil
}
