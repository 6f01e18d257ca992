#!/usr/bin/env bash
cd .gpu/pf && timeout 500 python3 ab.py 6
