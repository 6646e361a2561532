package stream

func ptr[T any](v T) *T { return &v }

func stringOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
