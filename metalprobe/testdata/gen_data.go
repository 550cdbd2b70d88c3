//go:build ignore

package main

// dualSocketLLDP is `lldpctl -f json` with two interfaces (lldpd's array shape).
const dualSocketLLDP = `{
  "lldp": {
    "interface": [
      {
        "eno1": {
          "via": "LLDP",
          "rid": "1",
          "age": "0 day, 00:02:10",
          "chassis": {
            "leaf01.dc1.example.net": {
              "id": {
                "type": "mac",
                "value": "44:38:39:00:00:0a"
              },
              "descr": "Cumulus Linux version 5.4.0 running on Mellanox Technologies Ltd. MSN2700",
              "mgmt-ip": [
                "10.10.0.11",
                "fe80::4638:39ff:fe00:a"
              ],
              "capability": [
                {
                  "type": "Bridge",
                  "enabled": true
                },
                {
                  "type": "Router",
                  "enabled": true
                }
              ]
            }
          },
          "port": {
            "id": {
              "type": "ifname",
              "value": "swp12"
            },
            "descr": "rack4-u07 eno1",
            "ttl": "120"
          },
          "vlan": {
            "vlan-id": "100",
            "pvid": true,
            "value": "provisioning"
          }
        }
      },
      {
        "ens2f0np0": {
          "via": "LLDP",
          "rid": "2",
          "age": "0 day, 00:02:08",
          "chassis": {
            "leaf01-data.dc1.example.net": {
              "id": {
                "type": "mac",
                "value": "0c:42:a1:5e:00:10"
              },
              "descr": "Arista Networks EOS version 4.30.2F running on an Arista Networks DCS-7050CX3-32S",
              "mgmt-ip": "10.10.1.21",
              "capability": {
                "type": "Bridge",
                "enabled": true
              }
            }
          },
          "port": {
            "id": {
              "type": "ifname",
              "value": "Ethernet12/1"
            },
            "descr": "rack4-u07 ens2f0np0",
            "ttl": "120"
          },
          "vlan": [
            {
              "vlan-id": "2000",
              "pvid": false,
              "value": "storage"
            },
            {
              "vlan-id": "2001",
              "pvid": true,
              "value": "tenant"
            }
          ]
        }
      }
    ]
  }
}
`

// dualSocketPCIIDs is the part of pci.ids that names dual-socket's devices. pcidb drops the
// subclasses of the file's last class, so it ends with "ff Unassigned class", as pci.ids does.
const dualSocketPCIIDs = `# Trimmed from pci.ids (https://pci-ids.ucw.cz) for the dual-socket fixture.
144d  Samsung Electronics Co Ltd
	a80a  NVMe SSD Controller PM9A1/PM9A3/980PRO
15b3  Mellanox Technologies
	1017  MT27800 Family [ConnectX-5]
1a03  ASPEED Technology, Inc.
	2000  ASPEED Graphics Family
8086  Intel Corporation
	1572  Ethernet Controller X710 for 10GbE SFP+
	2020  Sky Lake-E DMI3 Registers
	a182  C620 Series Chipset Family SATA Controller [AHCI mode]

# List of known device classes, subclasses and programming interfaces
C 01  Mass storage controller
	06  SATA controller
		01  AHCI 1.0
	08  Non-Volatile memory controller
		02  NVM Express
C 02  Network controller
	00  Ethernet controller
C 03  Display controller
	00  VGA compatible controller
C 06  Bridge
	00  Host bridge
C ff  Unassigned class
`
