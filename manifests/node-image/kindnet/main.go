// Command cdsim-kindnet is the node image's pod network daemon: a small,
// offline-buildable stand-in for kind's kindnetd (whose nested Go module is not
// served by the module proxy these machines reach).
//
// On every node it runs as a hostNetwork DaemonSet pod and, in a bounded poll
// loop against the API server:
//   - writes /etc/cni/net.d/10-kindnet.conflist (ptp + host-local + portmap) for
//     this node's spec.podCIDR once it is allocated, which makes the node Ready;
//   - keeps one route per other node: that node's podCIDR via its InternalIP;
//   - masquerades pod traffic leaving the pod subnet (chain CDSIM-KINDNET-MASQ).
//
// NetworkPolicy is enforced by kube-network-policies, a second container of
// the same DaemonSet (see default-cni.yaml).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	cniConfPath  = "/etc/cni/net.d/10-kindnet.conflist"
	masqChain    = "CDSIM-KINDNET-MASQ"
	pollInterval = 5 * time.Second
)

func main() {
	nodeName := os.Getenv("NODE_NAME")
	if nodeName == "" {
		log.Fatal("NODE_NAME is not set: the DaemonSet must pass spec.nodeName")
	}
	podSubnet := os.Getenv("POD_SUBNET")
	if _, _, err := net.ParseCIDR(podSubnet); err != nil {
		log.Fatalf("POD_SUBNET %q is not a CIDR: %v", podSubnet, err)
	}

	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("in-cluster config: %v", err)
	}
	// kind patches the API server's node-network address in so that this pod
	// does not depend on kube-proxy (which needs a ready network first).
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("kubernetes client: %v", err)
	}

	if err := ensureMasquerade(podSubnet); err != nil {
		log.Printf("masquerade rules: %v", err)
	}
	for {
		if err := reconcile(client, nodeName); err != nil {
			log.Printf("reconcile: %v", err)
		}
		time.Sleep(pollInterval)
	}
}

// reconcile lists the nodes once and brings the CNI config and routes in line.
func reconcile(client kubernetes.Interface, self string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if node.Spec.PodCIDR == "" {
			continue
		}
		if node.Name == self {
			if err := writeCNIConfig(node.Spec.PodCIDR); err != nil {
				return err
			}
			continue
		}
		if err := ensureRoute(node); err != nil {
			log.Printf("route to %s: %v", node.Name, err)
		}
	}
	return nil
}

// writeCNIConfig writes the conflist atomically, only when it changes.
func writeCNIConfig(podCIDR string) error {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"ranges":  []any{[]any{map[string]any{"subnet": podCIDR}}},
				},
				"mtu": 1500,
			},
			map[string]any{
				"type":         "portmap",
				"capabilities": map[string]any{"portMappings": true},
			},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(cniConfPath); err == nil && string(old) == string(data) {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(cniConfPath), ".10-kindnet.conflist.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, cniConfPath); err != nil {
		return fmt.Errorf("rename to %s: %w", cniConfPath, err)
	}
	log.Printf("wrote %s for pod CIDR %s", cniConfPath, podCIDR)
	return nil
}

// ensureRoute routes the other node's pod CIDR via its InternalIP.
func ensureRoute(node *corev1.Node) error {
	_, dst, err := net.ParseCIDR(node.Spec.PodCIDR)
	if err != nil {
		return fmt.Errorf("pod CIDR %q: %w", node.Spec.PodCIDR, err)
	}
	var gw net.IP
	for _, addr := range node.Status.Addresses {
		ip := net.ParseIP(addr.Address)
		if addr.Type == corev1.NodeInternalIP && ip != nil && (ip.To4() != nil) == (dst.IP.To4() != nil) {
			gw = ip
			break
		}
	}
	if gw == nil {
		return fmt.Errorf("no InternalIP of the pod CIDR's family")
	}
	return netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: gw})
}

// ensureMasquerade installs `POSTROUTING -> CDSIM-KINDNET-MASQ`, which masquerades
// traffic from the pod subnet to anything outside it.
func ensureMasquerade(podSubnet string) error {
	if out, err := iptables("-t", "nat", "-N", masqChain); err != nil && !strings.Contains(out, "exists") {
		return fmt.Errorf("create chain: %v: %s", err, out)
	}
	if _, err := iptables("-t", "nat", "-C", "POSTROUTING", "-j", masqChain); err != nil {
		if out, err := iptables("-t", "nat", "-A", "POSTROUTING", "-j", masqChain); err != nil {
			return fmt.Errorf("jump rule: %v: %s", err, out)
		}
	}
	if out, err := iptables("-t", "nat", "-F", masqChain); err != nil {
		return fmt.Errorf("flush chain: %v: %s", err, out)
	}
	rules := [][]string{
		{"-d", podSubnet, "-j", "RETURN"},
		{"-m", "addrtype", "--dst-type", "LOCAL", "-j", "RETURN"},
		{"-s", podSubnet, "-j", "MASQUERADE"},
	}
	for _, rule := range rules {
		args := append([]string{"-t", "nat", "-A", masqChain}, rule...)
		if out, err := iptables(args...); err != nil {
			return fmt.Errorf("rule %v: %v: %s", rule, err, out)
		}
	}
	return nil
}

func iptables(args ...string) (string, error) {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	return string(out), err
}
