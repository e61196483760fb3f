// The real kube-ovn CNI plugin (cmd/cni) for the reported stack: peers/pins.tsv says why this
// version, and why multus-cni is required at v4.2.3. The replace block is kube-ovn v1.14.10's own
// (its go.mod), which a dependent module does not inherit: forks of arp and libovsdb, and k8s.io
// pinned to v0.32.8. It stays apart from multus's modules, whose k8s.io versions differ.
module cni-delguard.peers/kube-ovn

go 1.25.1

tool github.com/kubeovn/kube-ovn/cmd/cni

require (
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/Microsoft/hcsshim v0.13.0 // indirect
	github.com/bhendo/go-powershell v0.0.0-20190719160123-219e7fb4e41e // indirect
	github.com/buger/jsonparser v1.1.1 // indirect
	github.com/containerd/cgroups/v3 v3.0.5 // indirect
	github.com/containerd/errdefs v1.0.0 // indirect
	github.com/containerd/errdefs/pkg v0.3.0 // indirect
	github.com/containerd/typeurl/v2 v2.2.3 // indirect
	github.com/containernetworking/cni v1.3.0 // indirect
	github.com/containernetworking/plugins v1.7.1 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/emicklei/go-restful/v3 v3.12.2 // indirect
	github.com/evanphx/json-patch/v5 v5.9.11 // indirect
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-openapi/jsonpointer v0.21.1 // indirect
	github.com/go-openapi/jsonreference v0.21.0 // indirect
	github.com/go-openapi/swag v0.23.1 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/groupcache v0.0.0-20241129210726-2c02b8208cf8 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/gnostic-models v0.6.9 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/gofuzz v1.2.0 // indirect
	github.com/google/gopacket v1.1.19 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gopherjs/gopherjs v1.21.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/josharian/native v1.1.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/jtolds/gls v4.20.0+incompatible // indirect
	github.com/juju/errors v1.0.0 // indirect
	github.com/k8snetworkplumbingwg/network-attachment-definition-client v1.7.6 // indirect
	github.com/kubeovn/kube-ovn v1.14.10 // indirect
	github.com/mailru/easyjson v0.9.0 // indirect
	github.com/mdlayher/arp v0.0.0-20220512170110-6706a2966875 // indirect
	github.com/mdlayher/ethernet v0.0.0-20220221185849-529eae5b6118 // indirect
	github.com/mdlayher/ndp v1.1.0 // indirect
	github.com/mdlayher/netx v0.0.0-20230430222610-7e21880baee8 // indirect
	github.com/mdlayher/packet v1.1.2 // indirect
	github.com/mdlayher/socket v0.5.1 // indirect
	github.com/moby/spdystream v0.5.0 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/moul/http2curl v1.0.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/mxk/go-flowrate v0.0.0-20140419014527-cca7078d478f // indirect
	github.com/ovn-org/libovsdb v0.7.0 // indirect
	github.com/parnurzeal/gorequest v0.3.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/scylladb/go-set v1.0.2 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/smarty/assertions v1.16.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.opencensus.io v0.24.0 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	golang.org/x/net v0.44.0 // indirect
	golang.org/x/oauth2 v0.31.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
	golang.org/x/sys v0.36.0 // indirect
	golang.org/x/term v0.35.0 // indirect
	golang.org/x/text v0.29.0 // indirect
	golang.org/x/time v0.13.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250715232539-7130f93afb79 // indirect
	google.golang.org/grpc v1.73.0 // indirect
	google.golang.org/protobuf v1.36.6 // indirect
	gopkg.in/evanphx/json-patch.v4 v4.12.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	// kube-ovn v1.14.10 requires v4.2.1, which the module proxy here refuses (see pins.tsv)
	gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.2.3 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	k8s.io/api v0.33.1 // indirect
	k8s.io/apimachinery v0.33.1 // indirect
	k8s.io/client-go v12.0.0+incompatible // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
	k8s.io/kube-openapi v0.32.8 // indirect
	k8s.io/utils v0.0.0-20250604170112-4c0f3b243397 // indirect
	sigs.k8s.io/controller-runtime v0.20.4 // indirect
	sigs.k8s.io/json v0.0.0-20241014173422-cfa47c3a1cc8 // indirect
	sigs.k8s.io/structured-merge-diff/v4 v4.7.0 // indirect
	sigs.k8s.io/yaml v1.5.0 // indirect
)

replace (
	github.com/mdlayher/arp => github.com/kubeovn/arp v0.0.0-20240218024213-d9612a263f68
	github.com/openshift/api => github.com/openshift/api v0.0.0-20191219222812-2987a591a72c
	github.com/openshift/client-go => github.com/openshift/client-go v0.0.0-20210112165513-ebc401615f47
	github.com/ovn-org/libovsdb => github.com/kubeovn/libovsdb v0.0.0-20241120032411-25ef1bbc83a5
	k8s.io/api => k8s.io/api v0.32.8
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.32.8
	k8s.io/apimachinery => k8s.io/apimachinery v0.32.8
	k8s.io/apiserver => k8s.io/apiserver v0.32.8
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.32.8
	k8s.io/client-go => k8s.io/client-go v0.32.8
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.32.8
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.32.8
	k8s.io/code-generator => k8s.io/code-generator v0.32.8
	k8s.io/component-base => k8s.io/component-base v0.32.8
	k8s.io/component-helpers => k8s.io/component-helpers v0.32.8
	k8s.io/controller-manager => k8s.io/controller-manager v0.32.8
	k8s.io/cri-api => k8s.io/cri-api v0.32.8
	k8s.io/cri-client => k8s.io/cri-client v0.32.8
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.32.8
	k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.32.8
	k8s.io/endpointslice => k8s.io/endpointslice v0.32.8
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.32.8
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.32.8
	k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20241212222426-2c72e554b1e7
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.32.8
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.32.8
	k8s.io/kubectl => k8s.io/kubectl v0.32.8
	k8s.io/kubelet => k8s.io/kubelet v0.32.8
	k8s.io/legacy-cloud-providers => k8s.io/legacy-cloud-providers v0.32.8
	k8s.io/metrics => k8s.io/metrics v0.32.8
	k8s.io/mount-utils => k8s.io/mount-utils v0.32.8
	k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.32.8
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.32.8
	kubevirt.io/client-go => github.com/kubeovn/kubevirt-client-go v0.0.0-20250507014510-dc51721a96f1
)
