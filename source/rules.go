package source

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
)

var invalid = nodeapi.Invalid

// Resolve checks the rules that need the fetched object — the uid and the
// namespace/name refer to the same ConfigMap, and the payload key exists —
// and returns the assignment completed with the object's resourceVersion and
// the payload key. src must have passed nodeapi.Validate; cm is what
// namespace/name resolved to (nil: it does not exist). Every error is a
// *nodeapi.InvalidError.
func Resolve(src *corev1.NodeConfigSource, cm *corev1.ConfigMap, defaultKey string) (*corev1.NodeConfigSource, error) {
	if err := nodeapi.Validate(src); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, nil
	}
	ref := src.ConfigMap
	if cm == nil {
		return nil, invalid("ConfigMap %s/%s does not exist", ref.Namespace, ref.Name)
	}
	if cm.Namespace != ref.Namespace || cm.Name != ref.Name {
		return nil, invalid("ConfigMap %s/%s resolved to %s/%s", ref.Namespace, ref.Name, cm.Namespace, cm.Name)
	}
	if cm.UID != ref.UID {
		return nil, invalid("invalid NodeConfigSource.ConfigMap, uid %s and %s/%s do not refer to the same object (its uid is %s)",
			ref.UID, ref.Namespace, ref.Name, cm.UID)
	}
	key := nodeapi.PayloadKeyOf(src, defaultKey)
	if _, ok := cm.Data[key]; !ok {
		return nil, invalid("ConfigMap %s/%s (UID: %s) has no key %q", ref.Namespace, ref.Name, ref.UID, key)
	}
	out := src.DeepCopy()
	out.ConfigMap.ResourceVersion = cm.ResourceVersion
	out.ConfigMap.KubeletConfigKey = key
	return out, nil
}
