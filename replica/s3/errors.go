package s3

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/sluicedb/sluice/replica"
)

// credentialsError marks a failure to obtain credentials. The SDK's chain
// (environment, shared files, EC2 instance metadata) reports such a failure
// as a long chain of retries; the wrapper lets classify recognise it by type.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// markedCredentials wraps the SDK's provider so its failures are typed.
type markedCredentials struct{ aws.CredentialsProvider }

func (m markedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.CredentialsProvider.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return c, &credentialsError{err}
	}
	return c, err
}

const (
	fixCredentials = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or give the host an instance role)"
	fixRejected    = "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
	fixDenied      = "allow s3:ListBucket, GetObject, PutObject and DeleteObject on the bucket to this key"
	fixBucket      = "create the bucket or correct its name in the replica URL"
	fixBucketName  = "bucket names are 3 to 63 lowercase letters, digits, dots and hyphens: correct the replica URL"
	fixEndpoint    = "correct the endpoint= parameter of the replica URL"
)

// classify turns an SDK error into a *replica.StoreError with one short
// cause, or returns err unchanged when it is not a store failure (a
// cancelled context, or a code the callers handle themselves).
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var ce *credentialsError
	if errors.As(err, &ce) {
		return &replica.StoreError{Kind: replica.ErrNoCredentials, Fix: fixCredentials}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		cause := replica.Shorten(api.ErrorCode()+": "+api.ErrorMessage(), 100)
		switch api.ErrorCode() {
		case "NoSuchBucket":
			return &replica.StoreError{Kind: replica.ErrNoBucket, Cause: cause, Fix: fixBucket}
		case "InvalidBucketName": // no retry makes such a bucket exist
			return &replica.StoreError{Kind: replica.ErrNoBucket, Cause: cause, Fix: fixBucketName}
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidSecurity", "AuthorizationHeaderMalformed":
			return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: cause, Fix: fixRejected}
		case "AccessDenied", "AllAccessDisabled", "AccountProblem", "Forbidden":
			return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: cause, Fix: fixDenied}
		}
	}
	switch status := httpStatus(err); {
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		// HEAD answers carry no error code.
		return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: http.StatusText(status), Fix: fixDenied}
	case status >= 500:
		return &replica.StoreError{Kind: replica.ErrUnavailable, Cause: replica.Shorten(http.StatusText(status)+": "+apiMessage(err), 160)}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return &replica.StoreError{Kind: replica.ErrBadEndpoint, Cause: "no such host " + dns.Name, Fix: fixEndpoint}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return &replica.StoreError{Kind: replica.ErrUnavailable, Cause: replica.Shorten(op.Error(), 160)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &replica.StoreError{Kind: replica.ErrUnavailable, Cause: "no answer before the deadline"}
	}
	return err
}

func apiMessage(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode() + " " + api.ErrorMessage()
	}
	return ""
}
