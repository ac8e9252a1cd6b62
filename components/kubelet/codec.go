package kubelet

import (
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/merge"
)

// NewPipeline returns a merge pipeline for the KubeletConfiguration profile: the codec
// (strict decoding with field paths, or lenient with warnings) and the
// layering of defaults, shared, drop-in, instance and flag layers.
func NewPipeline(opts merge.Options) (*merge.Pipeline[kubeletv1beta1.KubeletConfiguration], error) {
	return merge.New[kubeletv1beta1.KubeletConfiguration](Profile{}, opts)
}

// Decode strictly decodes one KubeletConfiguration document (YAML or JSON), defaults
// and validates it. Errors name the document and every field at fault
// (*merge.Error).
func Decode(name string, data []byte) (*kubeletv1beta1.KubeletConfiguration, error) {
	return merge.DecodeDocument[kubeletv1beta1.KubeletConfiguration](Profile{}, name, data)
}
