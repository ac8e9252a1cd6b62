package nodeapi

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func ref(ns, name, uid, key string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: ns, Name: name, UID: types.UID(uid), KubeletConfigKey: key}}
}

func testSource(uid, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "cm-" + uid, UID: types.UID("uid-" + uid),
		ResourceVersion: rv, KubeletConfigKey: "kubelet",
	}}
}
