package azure

import (
	"context"
	"errors"
	"net"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/sluicedb/sluice/replica"
)

// classify turns an Azure SDK error into a *replica.StoreError with one
// short cause, or returns err unchanged.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		cause := replica.Shorten(re.ErrorCode, 100)
		switch {
		case bloberror.HasCode(err, bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted):
			return &replica.StoreError{Kind: replica.ErrNoBucket, Cause: cause, Fix: "create the container or correct its name in the replica URL"}
		case bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.InvalidAuthenticationInfo, bloberror.NoAuthenticationInformation):
			return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: cause, Fix: "check AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY"}
		case bloberror.HasCode(err, bloberror.AuthorizationFailure, bloberror.AuthorizationPermissionMismatch, bloberror.InsufficientAccountPermissions):
			return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: cause, Fix: "allow this key to list, read, write and delete blobs in the container"}
		case re.StatusCode >= 500:
			return &replica.StoreError{Kind: replica.ErrUnavailable, Cause: replica.Shorten(re.ErrorCode, 100)}
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return &replica.StoreError{Kind: replica.ErrBadEndpoint, Cause: "no such host " + dns.Name, Fix: "correct the account name or endpoint in the replica URL"}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return &replica.StoreError{Kind: replica.ErrUnavailable, Cause: replica.Shorten(op.Error(), 160)}
	}
	return err
}
