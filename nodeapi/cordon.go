package nodeapi

// CordonAnnotation is on a Node while the stock kubelet's run role keeps it
// cordoned (spec.unschedulable) for a config change that needs a drain:
// the run role sets it in the same PATCH that cordons the Node, and
// removes it in the same PATCH that uncordons it. Its value says why (the
// config drained for, and when), for people. The run role uncordons only a
// Node that carries it, so a Node an administrator cordoned is never
// uncordoned by dynconfig.
const CordonAnnotation = "dynconfig.io/cordoned"
