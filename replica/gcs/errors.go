package gcs

import (
	"context"
	"errors"
	"net"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/sluicedb/sluice/replica"
)

// classify turns a GCS client error into a *replica.StoreError with one
// short cause, or returns err unchanged.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return &replica.StoreError{Kind: replica.ErrNoBucket, Fix: "create the bucket or correct its name in the replica URL"}
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		cause := replica.Shorten(http.StatusText(ge.Code)+": "+ge.Message, 100)
		switch {
		case ge.Code == http.StatusUnauthorized:
			return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: cause, Fix: "check GOOGLE_APPLICATION_CREDENTIALS"}
		case ge.Code == http.StatusForbidden:
			return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: cause, Fix: "grant this account Storage Object Admin on the bucket"}
		case ge.Code >= 500:
			return &replica.StoreError{Kind: replica.ErrUnavailable, Cause: cause}
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return &replica.StoreError{Kind: replica.ErrBadEndpoint, Cause: "no such host " + dns.Name, Fix: "correct the endpoint or STORAGE_EMULATOR_HOST"}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return &replica.StoreError{Kind: replica.ErrUnavailable, Cause: replica.Shorten(op.Error(), 160)}
	}
	return err
}
