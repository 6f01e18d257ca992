import json,sys
def analyse(d, warm=6):
    t=json.load(open(d+'/trace.json')); ev=t['traceEvents'] if isinstance(t,dict) else t
    m=json.load(open(d+'/metrics.json'))
    steps=len(m['step_seconds'])
    print(d, 'step mean after warm %.1f ms'%(1e3*sum(m['step_seconds'][warm:])/(steps-warm)))
    for r in range(4):
        fb=sorted([e for e in ev if e.get('pid')==r and e.get('tid')==0 and e.get('ph')=='X' and e['name'][0] in 'FB' and ' ' not in e['name']], key=lambda e:e['ts'])
        n=len(fb)//steps
        tot={'busy':0,'gapF':0,'gapB':0,'ends':0}
        per=[]
        for s in range(warm, steps-1):
            st=fb[s*n:(s+1)*n]; nx=fb[(s+1)*n]
            busy=sum(e['dur'] for e in st)
            # gap before each event, attributed by kind of the event that waited
            gF=gB=0
            for a,b in zip(st,st[1:]):
                g=b['ts']-(a['ts']+a['dur'])
                if b['name'][0]=='F': gF+=g
                else: gB+=g
            end=nx['ts']-(st[-1]['ts']+st[-1]['dur'])
            tot['busy']+=busy; tot['gapF']+=gF; tot['gapB']+=gB; tot['ends']+=end
        k=steps-1-warm
        span=sum(tot.values())/k
        print(' rank',r,' '.join('%s %.1f'%(a,b/k/1e3) for a,b in tot.items()),'span %.1f'%(span/1e3), 'util %.3f'%(tot['busy']/k/span))
for d in sys.argv[1:]: analyse(d)
