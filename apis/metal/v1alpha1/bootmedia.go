package v1alpha1

// BootMediaURLKey is the key of the boot ISO's URL in the Secret a VirtualMedia boot
// configuration's status.bootMediaSecretRef names (written by the boot service).
const BootMediaURLKey = "url"
