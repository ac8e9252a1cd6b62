package merge

// ProcessCPUTime is processCPUTime for the external test package.
var ProcessCPUTime = processCPUTime
