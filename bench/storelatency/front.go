package storelatency

import (
	"github.com/sluicedb/sluice/internal/minioproc"
)

// Front puts a proxy with spec in front of m: m.Endpoint (and so m.URL and
// m.Client) addresses the proxy until stop, which restores it and returns
// what the proxy added. A zero spec changes nothing.
func Front(m *minioproc.Server, spec Spec) (p *Proxy, stop func() string, err error) {
	if spec.Zero() {
		return nil, func() string { return "" }, nil
	}
	direct := m.Endpoint
	if p, err = Start(direct, spec); err != nil {
		return nil, nil, err
	}
	m.Endpoint = p.URL
	return p, func() string {
		m.Endpoint = direct
		s := p.Summary()
		p.Close()
		return s
	}, nil
}
