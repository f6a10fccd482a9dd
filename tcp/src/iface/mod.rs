//! Ethernet, ARP, IPv4, ICMP.
